package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/eval"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// The phases `ppl --phases` knows.
var phaseNames = []string{"float", "qdq", "npu", "artifact"}

// phaseOptions configures runPhases.
type phaseOptions struct {
	model, floatPath, artifact, tokPath, acts string
	text                                      string
	phases                                    []string
	ctx, threads                              int
	opts                                      eval.Options
	asJSON                                    bool
}

// parsePhases reads a --phases list.
func parsePhases(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(phaseNames, p) {
			return nil, fmt.Errorf("--phases: unknown phase %q (want %s)", p, strings.Join(phaseNames, ", "))
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("--phases: %s given twice", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// runPhases scores one text with each phase of a quantized model and
// prints the perplexities and the KL divergence and top-1 agreement of
// each phase against the first.
func runPhases(w io.Writer, o phaseOptions) error {
	needQuant := slices.ContainsFunc(o.phases, func(p string) bool { return p != "float" })
	var man *qmodel.Manifest
	if qmodel.IsDir(o.model) {
		var err error
		if man, err = qmodel.ReadManifest(o.model); err != nil {
			return err
		}
	} else if needQuant {
		return fmt.Errorf("phases %v need a quantized model folder (aotlm quantize) as -m", o.phases)
	}
	tok, sessions, closeAll, err := openPhases(man, o)
	if err != nil {
		return err
	}
	defer closeAll()
	ids, bos, err := eval.Tokenize(tok, o.text)
	if err != nil {
		return err
	}
	o.opts.BOS = bos
	res, err := eval.PerplexityPhases(sessions, ids, o.opts)
	if err != nil {
		return err
	}
	if o.asJSON {
		type row struct {
			Phase    string  `json:"phase"`
			PPL      float64 `json:"ppl"`
			NLL      float64 `json:"nll"`
			StdErr   float64 `json:"ppl_stderr"`
			KL       float64 `json:"kl"`
			KLStdErr float64 `json:"kl_stderr"`
			MaxKL    float64 `json:"max_kl"`
			Top1     float64 `json:"top1"`
		}
		rows := make([]row, len(res))
		for i, r := range res {
			rows[i] = row{o.phases[i], r.PPL, r.NLL, r.StdErr, r.KL, r.KLStdErr, r.MaxKL, r.Top1}
		}
		return json.NewEncoder(w).Encode(map[string]any{"phases": rows, "tokens": res[0].Tokens,
			"ctx": res[0].Ctx, "chunks": res[0].Chunks, "method": res[0].Method})
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\tPPL\t+/-\tmean KL vs %s\t+/-\tmax KL\tsame top-1\n", o.phases[0])
	for i, r := range res {
		fmt.Fprintf(tw, "%s\t%.4f\t%.5f\t%.6f\t%.6f\t%.4f\t%.2f%%\n", o.phases[i], r.PPL, r.StdErr, r.KL, r.KLStdErr, r.MaxKL, 100*r.Top1)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d tokens scored; %s rule, %d chunks of %d tokens\n", res[0].Tokens, res[0].Method, res[0].Chunks, res[0].Ctx)
	return nil
}

// phaseSession opens the session of one phase, and what releases it.
func phaseSession(p string, man *qmodel.Manifest, o phaseOptions) (eval.Session, func(), error) {
	switch p {
	case "float":
		src := o.floatPath
		if src == "" && man != nil {
			src = man.Source
		}
		if src == "" {
			src = o.model
		}
		m, err := loadFloat(src)
		if err != nil {
			return nil, nil, fmt.Errorf("float model (set it with --float): %w", err)
		}
		s, err := qdq.NewSession(m, o.ctx, o.threads, nil)
		return s, nil, err
	case "qdq", "npu":
		m, _, err := qmodel.Load(o.model)
		if err != nil {
			return nil, nil, err
		}
		r, err := quant.ParseRecipe(man.Recipe)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", o.model, err)
		}
		sim := &qdq.Sim{Outliers: man.Outliers}
		if p == "npu" {
			// the NPU's W4A16: static 16-bit activations (the ranges
			// quantize --calib recorded, else from the greedy sequence
			// the KV calibration uses), uint8 KV
			if sim.Static16, err = recordedRanges(man); err != nil {
				return nil, nil, err
			}
			if sim.Static16 == nil {
				if sim.Static16, err = qdq.CalibrateRanges(m, nil, o.ctx); err != nil {
					return nil, nil, err
				}
			}
			if sim.KV, err = qdq.CalibrateKV(m, nil, o.ctx); err != nil {
				return nil, nil, err
			}
		} else {
			if o.acts == "int8" {
				sim.Int8 = qdq.PackedLinears(man)
			}
			if r.KV == quant.KVU8 {
				if sim.KV, err = qdq.CalibrateKV(m, nil, o.ctx); err != nil {
					return nil, nil, err
				}
			}
		}
		s, err := qdq.NewSession(m, o.ctx, o.threads, sim)
		return s, nil, err
	case "artifact":
		path, done := o.artifact, func() {}
		if path == "" {
			var err error
			if path, done, err = compileTemp(o.model, man, o); err != nil {
				return nil, nil, err
			}
		}
		s, closeFn, err := artifactSession(path, o.ctx, o.threads)
		if err != nil {
			done()
			return nil, nil, err
		}
		return s, func() { closeFn(); done() }, nil
	}
	return nil, nil, fmt.Errorf("unknown phase %q", p)
}

// compileTemp compiles a quantized folder as `aotlm compile` does by
// default (AR-32 prefill plan, the recipe's KV cache, int8 or float
// activations as asked) into a temporary file.
func compileTemp(dir string, man *qmodel.Manifest, o phaseOptions) (string, func(), error) {
	r, err := quant.ParseRecipe(man.Recipe)
	if err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp("", "aotlm-ppl-")
	if err != nil {
		return "", nil, err
	}
	done := func() { os.RemoveAll(tmp) }
	kv := "f32"
	if r.KV == quant.KVU8 {
		kv = "u8"
	}
	path := filepath.Join(tmp, "model.aot")
	opts := compile.Options{ARLens: []int{32}, Ctx: o.ctx, KV: kv, FloatActivations: o.acts == "float"}
	if err := compile.CompileFile(dir, path, opts); err != nil {
		done()
		return "", nil, err
	}
	return path, done, nil
}

// artifactSession opens a compiled artifact's session for ctx positions.
// It is the only call of this file into the model runtime.
func artifactSession(path string, ctx, threads int) (eval.Session, func(), error) {
	m, err := aotlm.Open(path, aotlm.Options{Threads: threads})
	if err != nil {
		return nil, nil, err
	}
	s, err := m.NewSession(ctx)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return scorer{ctx: context.Background(), s: s}, func() { s.Close(); m.Close() }, nil
}

// loadFloat reads a checkpoint's config and float32 weights.
func loadFloat(path string) (*arch.Model, error) {
	if qmodel.IsDir(path) {
		m, _, err := qmodel.Load(path)
		return m, err
	}
	ck, err := detect.Open(path)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// openTokenizer opens the tokenizer of path (a tokenizer file, or a model).
func openTokenizer(path, modelPath string) (tokenizer.Tokenizer, error) {
	tok, err := model.OpenTokenizer(path, 0)
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, fmt.Errorf("%s has no tokenizer: pass --tokenizer <file>", modelPath)
	}
	return tok, nil
}

// recordedRanges returns the linear input ranges a quantized folder's
// calibration recorded, or nil.
func recordedRanges(man *qmodel.Manifest) (map[string]qdq.Range, error) {
	if len(man.Calibration) == 0 {
		return nil, nil
	}
	var rec calibRecord
	if err := json.Unmarshal(man.Calibration, &rec); err != nil {
		return nil, fmt.Errorf("manifest calibration: %w", err)
	}
	if len(rec.Ranges) == 0 {
		return nil, nil
	}
	out := make(map[string]qdq.Range, len(rec.Ranges))
	for name, r := range rec.Ranges {
		out[name] = qdq.Range{Min: r[0], Max: r[1]}
	}
	return out, nil
}

// runLambadaPhases scores LAMBADA-style items with each phase of a
// quantized model (eval --task lambada --phases) and prints each phase's
// accuracy and perplexities, and the KL divergence and top-1 agreement of
// its last-word distributions against the first phase's.
func runLambadaPhases(w io.Writer, items []eval.LambadaItem, o phaseOptions) error {
	if !qmodel.IsDir(o.model) {
		return fmt.Errorf("--phases needs a quantized model folder (aotlm quantize) as -m")
	}
	man, err := qmodel.ReadManifest(o.model)
	if err != nil {
		return err
	}
	if o.ctx <= 0 || o.ctx > man.Config.Context {
		o.ctx = man.Config.Context
	}
	tok, sessions, closeAll, err := openPhases(man, o)
	if err != nil {
		return err
	}
	defer closeAll()
	enc := func(text string) []int {
		return tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
	}
	res, err := eval.LambadaPhases(sessions, enc, items)
	if err != nil {
		return err
	}
	if o.asJSON {
		type row struct {
			Phase    string  `json:"phase"`
			Acc      float64 `json:"acc"`
			PPL      float64 `json:"ppl"`
			TokenPPL float64 `json:"token_ppl"`
			KL       float64 `json:"kl"`
			Top1     float64 `json:"top1"`
		}
		rows := make([]row, len(res))
		for i, r := range res {
			rows[i] = row{o.phases[i], r.Acc, r.PPL, r.TokenPPL, r.KL, r.Top1}
		}
		return json.NewEncoder(w).Encode(map[string]any{"task": "lambada", "phases": rows, "items": res[0].Items, "tokens": res[0].Tokens})
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\taccuracy\tPPL\tPPL per token\tmean KL vs %s\tsame top-1\n", o.phases[0])
	for i, r := range res {
		fmt.Fprintf(tw, "%s\t%.2f%%\t%.4f\t%.4f\t%.6f\t%.2f%%\n", o.phases[i], 100*r.Acc, r.PPL, r.TokenPPL, r.KL, 100*r.Top1)
	}
	tw.Flush()
	fmt.Fprintf(w, "lambada: %d passages, %d last-word tokens scored\n", res[0].Items, res[0].Tokens)
	return nil
}

// openPhases opens the model's tokenizer and one session per phase of o;
// closeAll releases the sessions (also when err is set, it is a no-op).
func openPhases(man *qmodel.Manifest, o phaseOptions) (tok tokenizer.Tokenizer, sessions []eval.Session, closeAll func(), err error) {
	var cleanup []func()
	closeAll = func() {
		for _, f := range cleanup {
			f()
		}
	}
	tokSrc := o.tokPath
	if tokSrc == "" {
		tokSrc = o.model
	}
	if tok, err = openTokenizer(tokSrc, o.model); err != nil {
		return nil, nil, closeAll, err
	}
	for _, p := range o.phases {
		s, done, err := phaseSession(p, man, o)
		if err != nil {
			closeAll()
			return nil, nil, func() {}, fmt.Errorf("phase %s: %w", p, err)
		}
		if done != nil {
			cleanup = append(cleanup, done)
		}
		sessions = append(sessions, s)
	}
	return tok, sessions, closeAll, nil
}
