package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Options configures Open.
type Options struct {
	// Tokenizer names a tokenizer file or folder, for checkpoints that carry
	// none (llama2.c) or to override the model's own.
	Tokenizer string
	// Threads bounds the goroutines of one pass (0: 1).
	Threads int
	// Mode is the prefill strategy of a compiled artifact: "hybrid" (AR-N
	// passes, the default) or "kv" (one token at a time).
	Mode string
}

// Model is an opened model: config, weights and tokenizer.
type Model struct {
	Path      string
	Format    string // checkpoint format
	Config    arch.Config
	Tokenizer tokenizer.Tokenizer // nil when none was found
	// Generation holds the model's generation defaults (a compiled
	// artifact's manifest "generation"), nil when unknown.
	Generation map[string]any

	weights graph.Weights
	eng     *engine.Engine // set for compiled artifacts
	mode    engine.Mode
	threads int
	last    *graph.Interpreter // graph computing the last row's logits
	all     *graph.Interpreter // graph computing every row's logits
}

// Open reads the checkpoint at path into memory as float32 and builds its
// graphs. The tokenizer is opts.Tokenizer, else the one the checkpoint
// embeds (GGUF) or that sits beside it.
func Open(path string, opts Options) (*Model, error) {
	if qmodel.IsDir(path) {
		return openQuantized(path, opts)
	}
	if isArtifact(path) {
		return openArtifact(path, opts)
	}
	ck, err := detect.Open(path)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	am, err := arch.Load(ck)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &Model{Path: path, Format: ck.Format(), Config: am.Config, weights: am.Weights}
	if m.Tokenizer, err = findTokenizer(path, ck, opts.Tokenizer, am.Config.Vocab); err != nil {
		return nil, err
	}
	return m, m.build(opts)
}

// build makes the two interpreters (last-row and all-rows logits).
func (m *Model) build(opts Options) error {
	for _, all := range []bool{false, true} {
		g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: all})
		if err != nil {
			return err
		}
		in, err := graph.NewInterpreter(g, m.weights, opts.Threads)
		if err != nil {
			return err
		}
		if all {
			m.all = in
		} else {
			m.last = in
		}
	}
	return nil
}

// openQuantized opens a quantized folder with its weights dequantized.
func openQuantized(dir string, opts Options) (*Model, error) {
	am, man, err := qmodel.Load(dir)
	if err != nil {
		return nil, err
	}
	m := &Model{Path: dir, Format: "aotlm-quant", Config: am.Config, weights: am.Weights}
	tokPath := opts.Tokenizer
	if tokPath == "" && man.Tokenizer != "" {
		tokPath = filepath.Join(dir, man.Tokenizer)
	}
	if tokPath != "" {
		if m.Tokenizer, err = loadTokenizer(tokPath, am.Config.Vocab); err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", tokPath, err)
		}
	} else if hasHFTokenizer(dir) {
		if m.Tokenizer, err = tokenizer.LoadDir(dir); err != nil {
			return nil, fmt.Errorf("tokenizer in %s: %w", dir, err)
		}
	}
	return m, m.build(opts)
}

func hasHFTokenizer(dir string) bool {
	for _, f := range []string{"tokenizer.json", "tokenizer.model", "vocab.json", "encoder.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// BOS returns the id to start a prompt with, or -1.
func (m *Model) BOS() int {
	if m.Config.BOS >= 0 {
		return m.Config.BOS
	}
	if m.Tokenizer != nil {
		return m.Tokenizer.BOS()
	}
	return -1
}

// StopIDs returns the ids that end generation.
func (m *Model) StopIDs() []int {
	ids := append([]int(nil), m.Config.EOS...)
	if m.Tokenizer != nil && m.Tokenizer.EOS() >= 0 {
		ids = append(ids, m.Tokenizer.EOS())
	}
	return ids
}

func findTokenizer(modelPath string, ck format.Checkpoint, explicit string, vocab int) (tokenizer.Tokenizer, error) {
	if explicit != "" {
		tok, err := loadTokenizer(explicit, vocab)
		if err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", explicit, err)
		}
		if tok.VocabSize() > vocab {
			return nil, fmt.Errorf("tokenizer %s has %d tokens but the model's vocabulary is %d", explicit, tok.VocabSize(), vocab)
		}
		return tok, nil
	}
	switch ck.Format() {
	case "gguf":
		if _, ok := ck.Metadata()["tokenizer.ggml.model"]; !ok {
			return nil, nil
		}
		tok, err := tokenizer.FromGGUF(ck.Metadata())
		if err != nil {
			return nil, fmt.Errorf("%s: embedded tokenizer: %w", modelPath, err)
		}
		return tok, nil
	case "safetensors":
		dir := modelPath
		if st, err := os.Stat(modelPath); err == nil && !st.IsDir() {
			dir = filepath.Dir(modelPath)
		}
		if hasHFTokenizer(dir) {
			tok, err := tokenizer.LoadDir(dir)
			if err != nil {
				return nil, fmt.Errorf("tokenizer in %s: %w", dir, err)
			}
			return tok, nil
		}
	case "llama2c":
		// llama2.c keeps tokenizer.bin beside the checkpoint; use it only if
		// its vocabulary is the model's.
		dir := filepath.Dir(modelPath)
		for _, f := range []string{"tokenizer.bin", fmt.Sprintf("tok%d.bin", vocab)} {
			p := filepath.Join(dir, f)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if tok, err := loadLlama2CTokenizer(p, vocab); err == nil {
				return tok, nil
			}
		}
	}
	return nil, nil
}

// loadTokenizer loads a tokenizer file or folder named by the user.
func loadTokenizer(path string, vocab int) (tokenizer.Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return tokenizer.LoadDir(path)
	}
	switch {
	case strings.HasSuffix(path, ".bin"):
		return loadLlama2CTokenizer(path, vocab)
	case strings.HasSuffix(path, ".gguf"):
		ck, err := detect.Open(path)
		if err != nil {
			return nil, err
		}
		defer ck.Close()
		return tokenizer.FromGGUF(ck.Metadata())
	}
	return tokenizer.Load(path)
}

// OpenTokenizer opens just the tokenizer of a path: a tokenizer file or
// folder, a GGUF model's embedded vocabulary, or a model folder's files.
func OpenTokenizer(path string) (tokenizer.Tokenizer, error) {
	if qmodel.IsDir(path) {
		m, err := Open(path, Options{})
		if err != nil {
			return nil, err
		}
		if m.Tokenizer == nil {
			return nil, fmt.Errorf("%s: the quantized model holds no tokenizer", path)
		}
		return m.Tokenizer, nil
	}
	tok, err := loadTokenizer(path, 0)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return tok, nil
}

// Close releases a compiled artifact's mapping (nothing for other models).
func (m *Model) Close() error {
	if m.eng != nil {
		return m.eng.Close()
	}
	return nil
}
