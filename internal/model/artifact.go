package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// isArtifact reports whether path is a compiled artifact (by its magic).
func isArtifact(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(artifact.Magic))
	n, _ := f.Read(head)
	return n == len(head) && string(head) == artifact.Magic
}

// openArtifact opens a compiled artifact: the engine runs its plans, and
// the tokenizer is rebuilt from the blob the compiler stored.
func openArtifact(path string, opts Options) (*Model, error) {
	eng, err := engine.Open(path)
	if err != nil {
		return nil, err
	}
	man := eng.Manifest()
	m := &Model{Path: path, Format: "aot", eng: eng, mode: engine.ModeHybrid, threads: opts.Threads,
		Config:     arch.Config{Family: man.Architecture, Vocab: man.Vocab, Context: man.Ctx, BOS: man.BOS, EOS: man.EOS},
		Generation: man.Generation}
	switch strings.ToLower(opts.Mode) {
	case "", "hybrid":
	case "kv":
		m.mode = engine.ModeKV
	default:
		eng.Close()
		return nil, fmt.Errorf("--mode %q: want hybrid or kv", opts.Mode)
	}
	if opts.Tokenizer != "" {
		m.Tokenizer, err = loadTokenizer(opts.Tokenizer, man.Vocab)
	} else if man.Tokenizer != nil {
		m.Tokenizer, err = artifactTokenizer(eng, man.Tokenizer.Kind, man.Tokenizer.Blob, man.Vocab)
	}
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	return m, nil
}

func artifactTokenizer(eng *engine.Engine, kind, blob string, vocab int) (tokenizer.Tokenizer, error) {
	data, err := eng.Blob(blob)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "gguf-metadata":
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var meta map[string]any
		if err := dec.Decode(&meta); err != nil {
			return nil, fmt.Errorf("%s: %w", blob, err)
		}
		return tokenizer.FromGGUF(jsonNumbers(meta).(map[string]any))
	case "llama2c":
		return tokenizer.ParseLlama2C(data, vocab)
	case "sentencepiece":
		return tokenizer.ParseSentencePiece(data)
	case "tokenizer.json":
		return tokenizer.ParseHF(data)
	}
	return nil, fmt.Errorf("tokenizer kind %q is not known", kind)
}

// jsonNumbers turns json.Number values into int64 (integers) or float64, as
// a GGUF reader returns them.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = jsonNumbers(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = jsonNumbers(x[k])
		}
		return x
	}
	return v
}
