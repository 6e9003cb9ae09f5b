package compile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// compileQuantized compiles a quantized model folder (package qmodel):
// its quantized tensors keep their integers in the artifact. The tensors
// are read from the folder one at a time as they are written.
func compileQuantized(dir, outPath string, opts Options) error {
	f, err := qmodel.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	man := f.Manifest
	var tok *Tokenizer
	switch {
	case opts.Tokenizer != "":
		tok, err = tokenizerFile(opts.Tokenizer)
	case man.Tokenizer != "":
		tok, err = tokenizerFile(filepath.Join(dir, man.Tokenizer))
	default:
		tok, err = folderTokenizer(dir)
	}
	if err != nil {
		return err
	}
	src := Source{Tokenizer: tok, Provenance: map[string]any{
		"file": filepath.Base(filepath.Clean(dir)), "format": "aotlm-quant", "source": filepath.Base(man.Source)}}
	if r, err := quant.ParseRecipe(man.Recipe); err == nil {
		src.Provenance["recipe"] = r.Name
		src.Recipe = man.Recipe
	}
	if err := folderExtras(dir, &src); err != nil {
		return err
	}
	if src.ChatTemplate == "" && tok != nil && tok.Kind == "gguf-metadata" {
		var meta map[string]any
		if json.Unmarshal(tok.Data, &meta) == nil {
			src.ChatTemplate, _ = meta["tokenizer.chat_template"].(string)
		}
	}
	floats := func() (graph.Weights, error) {
		w := graph.Weights{}
		for _, n := range f.Names() {
			v, err := f.Float(n)
			if err != nil {
				return nil, err
			}
			w[n] = v
		}
		return w, nil
	}
	if err := compileModel(man.Config, folderSource{f}, floats, src, opts, outPath); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// folderSource serves a quantized folder's weights: the quantized ones
// as their stored parts, the others in float32.
type folderSource struct{ f *qmodel.Folder }

func (s folderSource) Weight(name string) (Weight, error) {
	q, err := s.f.Quantized(name)
	if err != nil {
		return Weight{}, err
	}
	if q != nil {
		return Weight{Quantized: q, Release: func() { s.f.Release(name) }}, nil
	}
	v, err := s.f.Float(name)
	return Weight{Values: v}, err
}

// calibTokens reads a calibration text file and encodes it with the
// stored tokenizer (no special tokens), keeping at most MaxCalibTokens.
func calibTokens(path string, tok *Tokenizer, vocab int) ([]int, error) {
	if tok == nil {
		return nil, fmt.Errorf("compile: --calib needs a tokenizer")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("compile: calibration text: %w", err)
	}
	t, err := buildTokenizer(tok, vocab)
	if err != nil {
		return nil, fmt.Errorf("compile: calibration tokenizer: %w", err)
	}
	ids := t.Encode(string(text), tokenizer.EncodeOptions{AddSpecial: true})
	if len(ids) == 0 {
		return nil, fmt.Errorf("compile: calibration text %s has no tokens", path)
	}
	return ids[:min(len(ids), MaxCalibTokens)], nil
}

// buildTokenizer rebuilds a tokenizer from its stored blob.
func buildTokenizer(tok *Tokenizer, vocab int) (tokenizer.Tokenizer, error) {
	switch tok.Kind {
	case "gguf-metadata":
		dec := json.NewDecoder(bytes.NewReader(tok.Data))
		dec.UseNumber()
		var meta map[string]any
		if err := dec.Decode(&meta); err != nil {
			return nil, err
		}
		return tokenizer.FromGGUF(numbers(meta).(map[string]any))
	case "llama2c":
		return tokenizer.ParseLlama2C(tok.Data, vocab)
	case "sentencepiece":
		return tokenizer.ParseSentencePiece(tok.Data)
	case "tokenizer.json":
		return tokenizer.ParseHF(tok.Data)
	}
	return nil, fmt.Errorf("tokenizer kind %q is not known", tok.Kind)
}

// numbers turns json.Number values into int64 or float64, as a GGUF
// reader returns them.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
