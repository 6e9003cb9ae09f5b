package compile

import (
	"encoding/json"
	"fmt"
	"github.com/aotlm/aotlm/internal/tokenizer"
	"os"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
)

// Options configures CompileModel and CompileFile.
type Options struct {
	ARLens []int // AR lengths besides 1 (e.g. 32)
	Ctx    int   // KV cache positions; 0 means the model's trained context
	// Tokenizer is a tokenizer file (tokenizer.json, .model, llama2.c
	// .bin, .gguf) or folder to store instead of the checkpoint's own.
	Tokenizer string
	// KV is the cache storage: "" or "f32" (float32), "f16", or "u8" (see
	// plan.KVCache), whose scales come from a calibration pass of the
	// float32 graph over CalibIDs (or a self-generated sequence when it
	// is empty; see calibrateKV).
	KV       string
	CalibIDs []int
	// CalibText, when set, is a text file whose tokens (by the stored
	// tokenizer, at most MaxCalibTokens) replace CalibIDs.
	CalibText string
	// ClampCtx lowers Ctx to the model's trained context instead of
	// refusing a larger one (what `run` wants for its default).
	ClampCtx bool
	// FloatActivations keeps quantized weights unpacked, for float32
	// activations (see Input.FloatActivations).
	FloatActivations bool
	// Jobs and Progress: see Input.
	Jobs     int
	Progress func(Progress)
}

// MaxCalibTokens bounds the calibration sequence read from CalibText.
const MaxCalibTokens = 512

// Tokenizer is the blob that rebuilds a tokenizer and its kind.
type Tokenizer struct {
	Kind string
	Data []byte
}

// Source is what a checkpoint brings besides config and weights.
type Source struct {
	Tokenizer    *Tokenizer     // nil: none is stored
	ChatTemplate string         // Jinja source, or ""
	Provenance   map[string]any // recorded in the manifest as given
	// Quantized holds the integers of the weights a quantized folder
	// stores quantized; the model's weights are their dequantized values.
	Quantized map[string]*quant.Quantized
	// Recipe and Generation go to the manifest as given.
	Recipe     []byte
	Generation map[string]any
}

// CompileModel compiles a resolved model to outPath.
func CompileModel(m *arch.Model, src Source, opts Options, outPath string) error {
	floats := func() (graph.Weights, error) { return m.Weights, nil }
	return compileModel(m.Config, mapSource{m.Weights, src.Quantized}, floats, src, opts, outPath)
}

// compileModel compiles the model of config cfg whose weights ws serves to
// outPath. floats returns every weight in float32, which only the u8 KV
// cache calibration needs (and then holds while it runs).
func compileModel(cfg arch.Config, ws WeightSource, floats func() (graph.Weights, error), src Source, opts Options, outPath string) error {
	ctx := opts.Ctx
	if ctx <= 0 {
		ctx = cfg.Context
	}
	if ctx > cfg.Context && opts.ClampCtx {
		ctx = cfg.Context
	}
	if ctx > cfg.Context {
		return fmt.Errorf("compile: context %d exceeds the model's trained context %d", ctx, cfg.Context)
	}
	// the graph is built for ctx positions, which picks longrope's factors
	// and dynamic scaling's base
	trained := cfg
	if cfg.RopeContext <= 0 && (cfg.RopeScaling.Type == "longrope" || cfg.RopeScaling.Type == "dynamic") {
		cfg.RopeContext = ctx
	}
	g, err := arch.Build(&cfg, arch.BuildOptions{AllLogits: false})
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	hp, err := hyperParams(&cfg)
	if err != nil {
		return err
	}
	in := Input{Graph: g, ARLens: opts.ARLens, Ctx: ctx, Jobs: opts.Jobs, Progress: opts.Progress,
		Manifest: plan.Manifest{Architecture: trained.Family, HyperParams: hp, Provenance: src.Provenance,
			ChatTemplate: src.ChatTemplate, BOS: trained.BOS, EOS: trained.EOS, Vocab: trained.Vocab,
			Recipe: src.Recipe, Generation: src.Generation}}
	if in.Manifest.BOS < -1 || in.Manifest.BOS >= trained.Vocab {
		in.Manifest.BOS = -1
	}
	if src.Tokenizer != nil {
		in.Tokenizer, in.TokenizerKind = src.Tokenizer.Data, src.Tokenizer.Kind
	}
	in.FloatActivations = opts.FloatActivations
	if m, ok := ws.(mapSource); ok {
		in.Weights, in.Quantized = m.vals, m.qs // Compile checks them whole
	} else {
		in.Source = ws
	}
	switch opts.KV {
	case "", "f32":
	case plan.KVCacheU8:
		ids := opts.CalibIDs
		if opts.CalibText != "" {
			if ids, err = calibTokens(opts.CalibText, src.Tokenizer, trained.Vocab); err != nil {
				return err
			}
		}
		// the interpreter runs over the float32 model: it is read whole
		// for the calibration and dropped before the weights are written
		w, err := floats()
		if err != nil {
			return err
		}
		if _, err := graph.NewInterpreter(g, w, 1); err != nil {
			return fmt.Errorf("compile: %w", err)
		}
		if in.KVCache, err = calibrateKV(g, w, ids, trained.BOS, ctx); err != nil {
			return err
		}
	case plan.KVCacheF16:
		in.KVCache = &plan.KVCache{DType: plan.KVCacheF16}
	default:
		return fmt.Errorf("compile: kv cache dtype %q is not f32, f16 or u8", opts.KV)
	}
	return Compile(in, outPath)
}

// hyperParams returns the config as a JSON object.
func hyperParams(c *arch.Config) (map[string]any, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("compile: hyper-parameters: %w", err)
	}
	var hp map[string]any
	if err := json.Unmarshal(b, &hp); err != nil {
		return nil, fmt.Errorf("compile: hyper-parameters: %w", err)
	}
	return hp, nil
}

// CompileFile reads the checkpoint at path (a file, a Hugging Face folder
// or a quantized folder), finds its tokenizer and compiles it to outPath.
// It streams: each weight is read from the mapped checkpoint when it is
// written and dropped after, opts.Jobs at a time, so memory holds a few
// tensors rather than the model (except for the u8 KV cache calibration,
// which runs over the whole float32 model first).
func CompileFile(path, outPath string, opts Options) error {
	if qmodel.IsDir(path) {
		return compileQuantized(path, outPath, opts)
	}
	ck, err := detect.Open(path)
	if err != nil {
		return err
	}
	defer ck.Close()
	m, err := arch.Open(ck)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var tok *Tokenizer
	if opts.Tokenizer != "" {
		tok, err = tokenizerFile(opts.Tokenizer)
		if err == nil {
			err = checkTokenizerSize(tok, m.Config.Vocab, opts.Tokenizer)
		}
	} else {
		tok, err = checkpointTokenizer(path, ck)
		// a tokenizer.bin beside a llama2.c checkpoint is used only if it
		// has the model's vocabulary
		if err == nil && checkTokenizerSize(tok, m.Config.Vocab, path) != nil {
			tok = nil
		}
	}
	if err != nil {
		return err
	}
	src := Source{Tokenizer: tok, Provenance: map[string]any{"file": filepath.Base(path), "format": ck.Format()}}
	src.ChatTemplate, _ = format.MetaString(ck.Metadata(), "tokenizer.chat_template")
	if ck.Format() == "safetensors" {
		dir := path
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			dir = filepath.Dir(path)
		}
		if err := folderExtras(dir, &src); err != nil {
			return err
		}
	}
	floats := func() (graph.Weights, error) {
		w := graph.Weights{}
		for _, n := range m.Names() {
			v, err := m.Read(n)
			if err != nil {
				return nil, err
			}
			w[n] = v
		}
		return w, nil
	}
	if err := compileModel(m.Config, archSource{m}, floats, src, opts, outPath); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// archSource serves a checkpoint's weights, read when asked for.
type archSource struct{ s *arch.Source }

func (a archSource) Weight(name string) (Weight, error) {
	v, err := a.s.Read(name)
	return Weight{Values: v}, err
}

// tokenizerFile reads a tokenizer named by the user.
func tokenizerFile(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		return folderTokenizer(path)
	}
	if strings.HasSuffix(path, ".gguf") {
		ck, err := detect.Open(path)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		defer ck.Close()
		return ggufTokenizer(ck.Metadata())
	}
	kind := "tokenizer.json"
	switch {
	case strings.HasSuffix(path, ".model"):
		kind = "sentencepiece"
	case strings.HasSuffix(path, ".bin"):
		kind = "llama2c"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return &Tokenizer{Kind: kind, Data: b}, nil
}

// folderTokenizer reads tokenizer.json or tokenizer.model from dir; nil if
// neither exists.
func folderTokenizer(dir string) (*Tokenizer, error) {
	for _, f := range []struct{ name, kind string }{{"tokenizer.json", "tokenizer.json"}, {"tokenizer.model", "sentencepiece"}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err == nil {
			return &Tokenizer{Kind: f.kind, Data: b}, nil
		}
		if !os.IsNotExist(err) {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return nil, nil
}

// checkpointTokenizer finds the tokenizer a checkpoint carries or sits
// beside; nil if there is none.
func checkpointTokenizer(path string, ck format.Checkpoint) (*Tokenizer, error) {
	switch ck.Format() {
	case "gguf":
		if _, ok := ck.Metadata()["tokenizer.ggml.model"]; ok {
			return ggufTokenizer(ck.Metadata())
		}
	case "safetensors":
		dir := path
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			dir = filepath.Dir(path)
		}
		return folderTokenizer(dir)
	case "llama2c":
		b, err := os.ReadFile(filepath.Join(filepath.Dir(path), "tokenizer.bin"))
		if err == nil {
			return &Tokenizer{Kind: "llama2c", Data: b}, nil
		}
	}
	return nil, nil
}

// ggufTokenizer stores a GGUF file's tokenizer.* metadata as one JSON object.
func ggufTokenizer(meta map[string]any) (*Tokenizer, error) {
	sub := map[string]any{}
	for k, v := range meta {
		if strings.HasPrefix(k, "tokenizer.") {
			sub[k] = v
		}
	}
	b, err := json.Marshal(sub)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: gguf metadata: %w", err)
	}
	return &Tokenizer{Kind: "gguf-metadata", Data: b}, nil
}

// checkTokenizerSize refuses a llama2.c tokenizer whose token count is not
// the model's vocabulary (the format cannot tell otherwise, and a wrong one
// produces garbage silently).
func checkTokenizerSize(tok *Tokenizer, vocab int, name string) error {
	if tok == nil || tok.Kind != "llama2c" {
		return nil
	}
	n, err := tokenizer.Llama2CTokenCount(tok.Data)
	if err != nil {
		return fmt.Errorf("tokenizer %s: %w", name, err)
	}
	if n != vocab {
		return fmt.Errorf("llama2.c tokenizer %s has %d tokens, the model's vocabulary is %d", name, n, vocab)
	}
	return nil
}

// folderExtras reads what a Hugging Face folder says about generation: the
// chat template of tokenizer_config.json (or chat_template.jinja) and the
// defaults of generation_config.json. Absent files are fine; malformed
// ones are errors naming the file.
func folderExtras(dir string, src *Source) error {
	if src.ChatTemplate == "" {
		if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
			src.ChatTemplate = string(b)
		} else if b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
			var cfg struct {
				ChatTemplate json.RawMessage `json:"chat_template"`
			}
			if err := json.Unmarshal(b, &cfg); err != nil {
				return fmt.Errorf("tokenizer_config.json: %w", err)
			}
			var one string
			var named []struct{ Name, Template string }
			switch {
			case json.Unmarshal(cfg.ChatTemplate, &one) == nil:
				src.ChatTemplate = one
			case json.Unmarshal(cfg.ChatTemplate, &named) == nil:
				for _, t := range named {
					if t.Name == "default" {
						src.ChatTemplate = t.Template
					}
				}
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		var g map[string]any
		if err := json.Unmarshal(b, &g); err != nil {
			return fmt.Errorf("generation_config.json: %w", err)
		}
		src.Generation = map[string]any{}
		for _, k := range []string{"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "do_sample", "max_new_tokens"} {
			if v, ok := g[k]; ok {
				src.Generation[k] = v
			}
		}
	}
	return nil
}
