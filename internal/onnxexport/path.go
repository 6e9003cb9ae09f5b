package onnxexport

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// The values of PathOptions.Activations.
const (
	ActivationsQDQ   = "qdq"
	ActivationsFloat = "float"
)

// PathOptions configures ExportPath.
type PathOptions struct {
	ARLen   int
	Context int // 0: DefaultContext, or the model's trained context if shorter
	// Activations is ActivationsQDQ (16-bit linear inputs, uint8 cache) or
	// ActivationsFloat; "" picks QDQ for a quantized folder, float
	// otherwise.
	Activations string
	// CalibText, with QDQ activations, names a text whose first Context
	// tokens give the activation ranges and cache scales in place of the
	// recorded or greedy ones.
	CalibText string
	Producer  string
}

// DefaultContext is the cache size ExportPath uses when none is given.
const DefaultContext = 1024

// Summary says what ExportPath wrote.
type Summary struct {
	Family      string
	Weights     string // "quantized" (a quantized folder's LPBQ/W8 parts) or "float"
	Activations string
	Calibrated  string // where the 16-bit ranges come from ("" for float)
	ARLen       int
	Context     int
}

// ExportPath exports the model at src (a quantized folder, or any model
// aotlm opens as float) into dir.
func ExportPath(src, dir string, o PathOptions) (Summary, error) {
	quantized := qmodel.IsDir(src)
	act := o.Activations
	if act == "" {
		act = ActivationsFloat
		if quantized {
			act = ActivationsQDQ
		}
	}
	if act != ActivationsQDQ && act != ActivationsFloat {
		return Summary{}, fmt.Errorf("onnx export: activations %q: want %s or %s", act, ActivationsQDQ, ActivationsFloat)
	}
	s := Summary{Activations: act, ARLen: o.ARLen, Weights: "float"}
	ids, err := calibIDs(src, o.CalibText, act)
	if err != nil {
		return s, err
	}
	opts := Options{ARLen: o.ARLen, Context: o.Context, Producer: o.Producer}
	if quantized {
		q, err := OpenQuantized(src, o.Context, act == ActivationsQDQ)
		if err != nil {
			return s, err
		}
		defer q.Close()
		opts.Context = q.Context
		if ids != nil {
			if err := q.CalibrateOn(ids); err != nil {
				return s, err
			}
		}
		s.Family, s.Weights, s.Calibrated, s.Context = q.Model.Config.Family, "quantized", q.Calibrated, opts.Context
		opts.Quant = q.QDQ
		return s, Export(dir, q.Model, opts)
	}
	m, err := load.Float(src)
	if err != nil {
		return s, err
	}
	opts.Context = defaultContext(o.Context, m.Config.Context)
	s.Family, s.Context = m.Config.Family, opts.Context
	if act == ActivationsQDQ {
		q := &QDQ{}
		if err := calibrateOn(q, m, ids, opts.Context); err != nil {
			return s, err
		}
		opts.Quant, s.Calibrated = q, "greedy"
		if ids != nil {
			s.Calibrated = "text"
		}
	}
	return s, Export(dir, m, opts)
}

// calibIDs tokenizes the calibration text path with src's tokenizer (nil
// without a path).
func calibIDs(src, path, act string) ([]int, error) {
	if path == "" {
		return nil, nil
	}
	if act != ActivationsQDQ {
		return nil, fmt.Errorf("onnx export: a calibration text needs --activations %s", ActivationsQDQ)
	}
	text, err := load.ReadText(path, "calibration text")
	if err != nil {
		return nil, err
	}
	tok, err := load.Tokenizer(src, src)
	if err != nil {
		return nil, fmt.Errorf("onnx export: calibration text: %w", err)
	}
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{AddSpecial: true})
	if len(ids) < 2 {
		return nil, fmt.Errorf("onnx export: calibration text %s holds %d tokens", path, len(ids))
	}
	return ids, nil
}

// defaultContext is ctx, or DefaultContext capped by the model's trained
// context when ctx is 0.
func defaultContext(ctx, trained int) int {
	if ctx > 0 {
		return ctx
	}
	if trained > 0 && trained < DefaultContext {
		return trained
	}
	return DefaultContext
}
