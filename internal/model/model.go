package model

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/hf"
	"github.com/aotlm/aotlm/internal/modelparts"
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
}

// Model is an opened checkpoint: config, float32 weights, tokenizer and
// the files beside it, run through the graph interpreter.
type Model struct {
	Path      string
	Format    string // checkpoint format
	Config    arch.Config
	Tokenizer tokenizer.Tokenizer // nil when none was found
	Files     hf.Files

	weights graph.Weights
	last    *graph.Interpreter // graph computing the last row's logits
	all     *graph.Interpreter // graph computing every row's logits
}

// Open reads the checkpoint at path (a GGUF file, a llama2.c checkpoint, a
// PyTorch file, a Hugging Face folder, or a quantized folder, whose weights
// are dequantized) into memory as float32 and builds its graphs. The
// tokenizer is opts.Tokenizer, else the one the checkpoint embeds or that
// sits beside it (package hf).
func Open(path string, opts Options) (*Model, error) {
	var m *Model
	if qmodel.IsDir(path) {
		am, man, err := qmodel.Load(path)
		if err != nil {
			return nil, err
		}
		files, err := hf.Folder(path, man.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m = &Model{Path: path, Format: "aotlm-quant", Config: am.Config, weights: am.Weights, Files: files}
	} else {
		ck, err := detect.Open(path)
		if err != nil {
			return nil, err
		}
		defer ck.Close()
		am, err := arch.Load(ck)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		files, err := hf.Find(path, ck)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m = &Model{Path: path, Format: ck.Format(), Config: am.Config, weights: am.Weights, Files: files}
	}
	if m.Config.Bidirectional {
		// its passes would attend only within each prefill chunk
		return nil, fmt.Errorf("%s: a text encoder (bidirectional attention, %s) gives embeddings only: compile it (aotlm compile) and use its embeddings", path, m.Config.Family)
	}
	if err := m.loadTokenizer(opts.Tokenizer); err != nil {
		return nil, err
	}
	return m, m.build(opts)
}

// loadTokenizer builds the tokenizer named by explicit, else the model's.
func (m *Model) loadTokenizer(explicit string) error {
	vocab := m.Config.Vocab
	if explicit != "" {
		tok, err := OpenTokenizer(explicit, vocab)
		if err != nil {
			return err
		}
		if tok.VocabSize() > vocab {
			return fmt.Errorf("tokenizer %s has %d tokens but the model's vocabulary is %d", explicit, tok.VocabSize(), vocab)
		}
		m.Tokenizer = tok
		return nil
	}
	var err error
	switch f := m.Files; {
	case f.Tokenizer != nil:
		if f.Tokenizer.Kind == "llama2c" && hf.Llama2CTokenizerSize(f.Tokenizer, vocab, m.Path) != nil {
			return nil // a tokenizer.bin of another vocabulary is not the model's
		}
		m.Tokenizer, err = f.Tokenizer.Build(vocab)
	case f.TokenizerDir != "":
		m.Tokenizer, err = tokenizer.LoadDir(f.TokenizerDir)
	}
	if err != nil {
		return fmt.Errorf("%s: tokenizer: %w", m.Path, err)
	}
	return nil
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

// Runtime returns the model as a runtime model, whose sessions run on the
// interpreter.
func (m *Model) Runtime() (*aotlm.Model, error) {
	gen, err := generationDefaults(m.Files.Generation)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	tok, _ := modelparts.PublicTokenizer(m.Tokenizer).(aotlm.Tokenizer)
	return aotlm.NewModel(aotlm.Config{
		Info:         aotlm.Info{Name: m.Path, Architecture: m.Config.Family, Vocab: m.Config.Vocab, Context: m.Config.Context, MaxContext: m.Config.Context, KVCache: "f32"},
		NewSequence:  func(ctx int) (aotlm.Sequence, error) { return m.NewSession(ctx) },
		Tokenizer:    tok,
		ChatTemplate: m.Files.ChatTemplate,
		BOS:          m.Config.BOS,
		EOS:          m.Config.EOS,
		Generation:   gen,
	})
}

// generationDefaults reads the generation_config.json fields a checkpoint
// kept.
func generationDefaults(g map[string]any) (aotlm.GenerationDefaults, error) {
	if len(g) == 0 {
		return aotlm.GenerationDefaults{}, nil
	}
	b, err := json.Marshal(g)
	if err != nil {
		return aotlm.GenerationDefaults{}, fmt.Errorf("generation config: %w", err)
	}
	return aotlm.ParseGenerationConfig(b)
}

// OpenTokenizer opens a tokenizer a user names: a tokenizer file or
// folder, a GGUF model's embedded vocabulary, or a model folder's files;
// vocab > 0 is the model's vocabulary (a llama2.c tokenizer.bin must have
// exactly that many tokens).
func OpenTokenizer(path string, vocab int) (tokenizer.Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
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
		tok, err := tokenizer.LoadDir(path)
		if err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", path, err)
		}
		return tok, nil
	}
	if strings.HasSuffix(path, ".bin") {
		return loadLlama2CTokenizer(path, vocab)
	}
	stored, err := hf.TokenizerFile(path)
	if err != nil {
		return nil, err
	}
	tok, err := stored.Build(vocab)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return tok, nil
}
