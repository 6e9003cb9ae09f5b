package score

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/eval"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/recipe"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// PhaseNames are the phases a quantized model is scored in:
//
//	float     the checkpoint it was quantized from
//	qdq       its dequantized weights, with the int8 activations of the
//	          linears the compiler packs and the recipe's uint8 KV cache
//	          simulated by quantize-dequantize
//	npu       the dequantized weights with static per-tensor 16-bit
//	          activations and a uint8 KV cache (the NPU's W4A16)
//	artifact  the compiled artifact
var PhaseNames = []string{"float", "qdq", "npu", "artifact"}

// ParsePhases reads a --phases list: names of PhaseNames, each once.
func ParsePhases(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(PhaseNames, p) {
			return nil, fmt.Errorf("--phases: unknown phase %q (want %s)", p, strings.Join(PhaseNames, ", "))
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("--phases: %s given twice", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// PhaseOptions say which model to score in which phases.
type PhaseOptions struct {
	// Model is the quantized folder (aotlm quantize); a float checkpoint
	// when the only phase is float.
	Model string
	// Float is the float checkpoint (default: the folder's source).
	Float string
	// Artifact is the compiled artifact (default: Model compiled now, as
	// aotlm compile does by default, with the recipe's KV cache).
	Artifact string
	// Tokenizer replaces the model's tokenizer ("": the model's).
	Tokenizer string
	// Activations are the linears' activations of the qdq and artifact
	// phases: "int8" (the packed linears') or "float".
	Activations string
	Phases      []string
	Ctx         int
	Threads     int
}

// Phases scores text in every phase of o, chunk by chunk as to says; the
// first phase is the reference of the others' KL divergence and top-1
// agreement.
func Phases(o PhaseOptions, text string, to TextOptions) ([]eval.PhaseResult, error) {
	opts := to.eval()
	needQuant := slices.ContainsFunc(o.Phases, func(p string) bool { return p != "float" })
	var man *qmodel.Manifest
	if qmodel.IsDir(o.Model) {
		var err error
		if man, err = qmodel.ReadManifest(o.Model); err != nil {
			return nil, err
		}
	} else if needQuant {
		return nil, fmt.Errorf("phases %v need a quantized model folder (aotlm quantize) as -m", o.Phases)
	}
	tok, sessions, closeAll, err := openPhases(man, o)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	ids, bos, err := eval.Tokenize(tok, text)
	if err != nil {
		return nil, err
	}
	opts.BOS = bos
	return eval.PerplexityPhases(sessions, ids, opts)
}

// LambadaPhases scores LAMBADA-style items in every phase of o (a context of
// 0 or past the model's: the model's): each phase's accuracy and
// perplexities, and the KL divergence and top-1 agreement of its
// last-word distributions against the first phase's.
func LambadaPhases(o PhaseOptions, items []eval.LambadaItem) ([]eval.LambadaPhaseResult, error) {
	if !qmodel.IsDir(o.Model) {
		return nil, fmt.Errorf("--phases needs a quantized model folder (aotlm quantize) as -m")
	}
	man, err := qmodel.ReadManifest(o.Model)
	if err != nil {
		return nil, err
	}
	if o.Ctx <= 0 || o.Ctx > man.Config.Context {
		o.Ctx = man.Config.Context
	}
	tok, sessions, closeAll, err := openPhases(man, o)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	enc := func(text string) []int {
		return tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
	}
	return eval.LambadaPhases(sessions, enc, items)
}

// openPhases opens the model's tokenizer and one session per phase of o;
// closeAll releases the sessions (also when err is set, it is a no-op).
func openPhases(man *qmodel.Manifest, o PhaseOptions) (tok tokenizer.Tokenizer, sessions []eval.Session, closeAll func(), err error) {
	var cleanup []func()
	closeAll = func() {
		for _, f := range cleanup {
			f()
		}
	}
	tokSrc := o.Tokenizer
	if tokSrc == "" {
		tokSrc = o.Model
	}
	if tok, err = load.Tokenizer(tokSrc, o.Model); err != nil {
		return nil, nil, closeAll, err
	}
	for _, p := range o.Phases {
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

// phaseSession opens the session of one phase, and what releases it.
func phaseSession(p string, man *qmodel.Manifest, o PhaseOptions) (eval.Session, func(), error) {
	switch p {
	case "float":
		src := o.Float
		if src == "" && man != nil {
			src = man.Source
		}
		if src == "" {
			src = o.Model
		}
		m, err := load.Float(src)
		if err != nil {
			return nil, nil, fmt.Errorf("float model (set it with --float): %w", err)
		}
		s, err := qdq.NewSession(m, o.Ctx, o.Threads, nil)
		return s, nil, err
	case "qdq", "npu":
		m, _, err := qmodel.Load(o.Model)
		if err != nil {
			return nil, nil, err
		}
		r, err := quant.ParseRecipe(man.Recipe)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", o.Model, err)
		}
		sim := &qdq.Sim{Outliers: man.Outliers}
		if p == "npu" {
			// the NPU's W4A16: static 16-bit activations (the ranges
			// quantize --calib recorded, else from the greedy sequence
			// the KV calibration uses), uint8 KV
			if sim.Static16, err = recipe.RecordedRanges(man); err != nil {
				return nil, nil, err
			}
			if sim.Static16 == nil {
				if sim.Static16, err = qdq.CalibrateRanges(m, nil, o.Ctx); err != nil {
					return nil, nil, err
				}
			}
			if sim.KV, err = qdq.CalibrateKV(m, nil, o.Ctx); err != nil {
				return nil, nil, err
			}
		} else {
			if o.Activations == "int8" {
				sim.Int8 = qdq.PackedLinears(man)
			}
			if r.KV == quant.KVU8 {
				if sim.KV, err = qdq.CalibrateKV(m, nil, o.Ctx); err != nil {
					return nil, nil, err
				}
			}
		}
		s, err := qdq.NewSession(m, o.Ctx, o.Threads, sim)
		return s, nil, err
	case "artifact":
		path, done := o.Artifact, func() {}
		if path == "" {
			var err error
			if path, done, err = compileTemp(o.Model, man, o); err != nil {
				return nil, nil, err
			}
		}
		s, closeFn, err := artifactSession(path, o.Ctx, o.Threads)
		if err != nil {
			done()
			return nil, nil, err
		}
		return s, func() { closeFn(); done() }, nil
	}
	return nil, nil, fmt.Errorf("unknown phase %q", p)
}

// compileTemp compiles a quantized folder as `aotlm compile` does by
// default (the AR-N prefill plan of load.ARLen, the recipe's KV cache,
// int8 or float activations as asked) into a temporary file.
func compileTemp(dir string, man *qmodel.Manifest, o PhaseOptions) (string, func(), error) {
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
	opts := compile.Options{ARLens: []int{load.ARLen}, Ctx: o.Ctx, KV: kv, FloatActivations: o.Activations == "float"}
	if err := compile.CompileFile(dir, path, opts); err != nil {
		done()
		return "", nil, err
	}
	return path, done, nil
}

// artifactSession opens a compiled artifact's session for ctx positions.
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
	return Scorer(context.Background(), s), func() { s.Close(); m.Close() }, nil
}
