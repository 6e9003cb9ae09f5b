package compile

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/hf"
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
	files, err := hf.Folder(dir, man.Tokenizer)
	if err != nil {
		return err
	}
	tok := files.Tokenizer
	if opts.Tokenizer != "" {
		if tok, err = hf.TokenizerFile(opts.Tokenizer); err != nil {
			return err
		}
	}
	src := Source{Tokenizer: tok, Quantized: qs, ChatTemplate: files.ChatTemplate, Generation: files.Generation, Provenance: map[string]any{
		"file": filepath.Base(filepath.Clean(dir)), "format": "aotlm-quant", "source": filepath.Base(man.Source)}}
	if r, err := quant.ParseRecipe(man.Recipe); err == nil {
		src.Provenance["recipe"] = r.Name
		src.Recipe = man.Recipe
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
func calibTokens(path string, tok *tokenizer.Stored, vocab int) ([]int, error) {
	if tok == nil {
		return nil, fmt.Errorf("compile: calibration text needs a tokenizer, and the model has none")
	}
	text, err := limits.ReadFile(path, "calibration text", limits.MaxTextFile)
	if err != nil {
		return nil, fmt.Errorf("compile: calibration text: %w", err)
	}
	t, err := tok.Build(vocab)
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
