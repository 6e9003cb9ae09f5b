package compile

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/hf"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tokenizer"
	"github.com/aotlm/aotlm/internal/userfile"
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
	src := Source{Tokenizer: tok, ChatTemplate: files.ChatTemplate, Generation: files.Generation, Provenance: map[string]any{
		"file": filepath.Base(filepath.Clean(dir)), "format": "aotlm-quant", "source": filepath.Base(man.Source)}}
	src.Outliers = man.Outliers
	if len(man.LoRA) > 0 {
		var l []any
		for _, a := range man.LoRA {
			l = append(l, map[string]any{"adapter": a.Adapter, "scale": a.Scale})
		}
		src.Provenance["lora"] = l
	}
	src.Passport = man.Passport
	if len(man.Calibration) > 0 {
		var rec struct {
			Rotation json.RawMessage `json:"rotation"`
		}
		if err := json.Unmarshal(man.Calibration, &rec); err != nil {
			return fmt.Errorf("compile: %s: the calibration record: %w", dir, err)
		}
		if len(rec.Rotation) > 0 && string(rec.Rotation) != "null" {
			src.Rotation = rec.Rotation
		}
	}
	if r, err := quant.ParseRecipe(man.Recipe); err == nil {
		src.Provenance["recipe"] = r.Name
		src.Recipe = man.Recipe
		if opts.MMProj != "" && opts.VisionWeights == "" {
			// the recipe's encoder storage, unless the options name one
			opts.VisionWeights = r.Vision.Weights
		}
	}
	if opts.MMProj != "" {
		var vtok tokenizer.Tokenizer
		if tok != nil {
			if vtok, err = tok.Build(man.Config.Vocab); err != nil {
				return fmt.Errorf("compile: tokenizer (%s): %w", tok.Kind, err)
			}
		}
		if src.Vision, err = loadVision(dir, nil, man.Config.Hidden, vtok, opts); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		src.Provenance["mmproj"] = filepath.Base(opts.MMProj)
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

// half reports whether the folder stores the tensor name in binary16
// (scheme f16; Quantized gives nil for it, Float its exact values).
func (s folderSource) half(name string) bool {
	e, ok := s.f.Manifest.Tensors[name]
	return ok && !e.Float && e.Scheme.Kind == string(quant.KindF16)
}

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
func calibTokens(path string, tok *tokenizer.Stored, vocab int) ([]int, error) {
	if tok == nil {
		return nil, fmt.Errorf("compile: calibration text needs a tokenizer, and the model has none")
	}
	text, err := userfile.ReadFile(path, userfile.Text.Named("calibration text"))
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
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
