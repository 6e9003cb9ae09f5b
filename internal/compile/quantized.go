package compile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// compileQuantized compiles a quantized model folder (package qmodel):
// its quantized tensors keep their integers in the artifact.
func compileQuantized(dir, outPath string, opts Options) error {
	m, man, err := qmodel.Load(dir)
	if err != nil {
		return err
	}
	qs, err := readQuantized(dir, man, m.Weights)
	if err != nil {
		return err
	}
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
	src := Source{Tokenizer: tok, Quantized: qs, Provenance: map[string]any{
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
	if err := CompileModel(m, src, opts, outPath); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// readQuantized reads the integers and scales of every quantized tensor of
// a folder and checks that they dequantize to the values Load returned.
func readQuantized(dir string, man *qmodel.Manifest, deq map[string][]float32) (map[string]*quant.Quantized, error) {
	ck, err := safetensors.Open(filepath.Join(dir, qmodel.WeightsName))
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	qs := map[string]*quant.Quantized{}
	for name, e := range man.Tensors {
		s := e.Scheme.Quant()
		if e.Float || s.Kind == quant.KindF16 {
			continue
		}
		if len(e.Shape) != 2 {
			return nil, fmt.Errorf("quantized model %s: tensor %q: shape %v", dir, name, e.Shape)
		}
		q := &quant.Quantized{Scheme: s, Rows: e.Shape[0], Cols: e.Shape[1], Padded: e.Padded}
		raw, err := ck.Bytes(name + ".q")
		if err != nil {
			return nil, fmt.Errorf("quantized model %s: %w", dir, err)
		}
		q.Q = make([]int8, len(raw))
		for i, b := range raw {
			q.Q[i] = int8(b)
		}
		if q.Scales, err = ck.ReadFloat32(name + ".scales"); err != nil {
			return nil, fmt.Errorf("quantized model %s: %w", dir, err)
		}
		if s.Kind == quant.KindLPBQ {
			c, err := ck.Bytes(name + ".codes")
			if err != nil {
				return nil, fmt.Errorf("quantized model %s: %w", dir, err)
			}
			q.Codes = slices.Clone(c)
		}
		if s.Kind == quant.KindQ4 && !s.Sym {
			if q.Zeros, err = ck.ReadFloat32(name + ".zeros"); err != nil {
				return nil, fmt.Errorf("quantized model %s: %w", dir, err)
			}
		}
		// Load has checked every part's size; the values must agree too.
		if !slices.Equal(q.Dequantize(), deq[name]) {
			return nil, fmt.Errorf("quantized model %s: tensor %q: parts do not dequantize to the loaded values", dir, name)
		}
		qs[name] = q
	}
	return qs, nil
}

// calibTokens reads a calibration text file and encodes it with the
// stored tokenizer (no special tokens), keeping at most MaxCalibTokens.
func calibTokens(path string, tok *Tokenizer, vocab int) ([]int, error) {
	if tok == nil {
		return nil, fmt.Errorf("compile: --calib needs a tokenizer")
	}
	text, err := limits.ReadFile(path, "calibration text", limits.MaxTextFile)
	if err != nil {
		return nil, fmt.Errorf("compile: calibration text: %w", err)
	}
	t, err := buildTokenizer(tok, vocab)
	if err != nil {
		return nil, fmt.Errorf("compile: calibration tokenizer: %w", err)
	}
	ids, err := tokenizer.EncodeChecked(t, string(text), tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		return nil, fmt.Errorf("compile: calibration text: %w", err)
	}
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
