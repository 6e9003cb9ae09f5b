package recipe

import (
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/imatrix"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
)

// QuantizeOptions say how Quantize quantizes a model.
type QuantizeOptions struct {
	Recipe quant.Recipe
	// LPBQReference rounds LPBQ ints against the unrounded block scale,
	// bit-exact with the published rule (WithLPBQMode).
	LPBQReference bool
	// Tokenizer replaces the model's, in the output and for calibration.
	Tokenizer string
	// FallbackW8 quantizes weights the block size does not divide at W8
	// instead of padding their last block.
	FallbackW8 bool
	Force      bool // replace an existing output folder
	Jobs       int  // tensors quantized at once (0: one per CPU)
	// Calib is the calibration of the recipe's calibrated methods; its
	// Tokenizer defaults to Tokenizer, else the model.
	Calib CalibOptions
	// Imatrix is a llama.cpp importance matrix (GGUF, llama-imatrix's
	// output): each linear it names gets the grid search weighted by its
	// inputs' mean squares (quant.SearchGrid), without a calibration
	// pass. Not with a recipe's calibration or rotation.
	Imatrix string
	// Progress, when not nil, is called after each tensor with the
	// tensors and bytes done of their totals.
	Progress func(done, total int, bytes, totalBytes int64)
	// LoRA lists the adapters merged into the float weights before the
	// recipe runs (qmodel.Options.LoRA).
	LoRA []lora.Spec
}

// Quantize quantizes the model at src with the recipe into the folder
// out: its rotations and calibration first (Prepare), then every weight,
// streamed.
func Quantize(src, out string, o QuantizeOptions) (*qmodel.Report, error) {
	r := o.Recipe
	if o.LPBQReference {
		r = WithLPBQMode(r, quant.LPBQReference)
	}
	calib := o.Calib
	if calib.Tokenizer == "" {
		calib.Tokenizer = o.Tokenizer
	}
	if calib.Tokenizer == "" {
		calib.Tokenizer = src
	}
	prepare, err := Prepare(r, calib)
	if err != nil {
		return nil, err
	}
	if o.Imatrix != "" {
		if prepare != nil {
			return nil, fmt.Errorf("--imatrix %s: the recipe's calibration or rotation already sets the weights' importance; use one or the other", o.Imatrix)
		}
		if prepare, err = imatrixPrepare(o.Imatrix); err != nil {
			return nil, err
		}
	}
	if prepare != nil {
		// rotations and calibration hold the whole model in float32, and
		// GPTQ its inputs' Hessians: collect garbage at 25% growth rather
		// than Go's default 100%, so the peak stays near what is live
		// (their slices hold no pointers, so the extra collections are
		// cheap)
		defer debug.SetGCPercent(debug.SetGCPercent(25))
	}
	opts := qmodel.Options{Recipe: r, Tokenizer: o.Tokenizer, FallbackW8: o.FallbackW8, Force: o.Force, Jobs: o.Jobs, Prepare: prepare, LoRA: o.LoRA}
	if o.Progress != nil {
		opts.Progress = func(p qmodel.Progress) { o.Progress(p.Done, p.Total, p.Bytes, p.TotalBytes) }
	}
	return qmodel.Quantize(src, out, opts)
}

// AutoWithin is Auto for a --max-size budget (ParseSize) over the model
// at src, measured rows (Sensitivity) and the order perBit.
func AutoWithin(src string, r quant.Recipe, rows []Row, maxSize string, perBit bool) (quant.Recipe, float64, []string, error) {
	maxBits, maxBytes, err := ParseSize(maxSize)
	if err != nil {
		return r, 0, nil, err
	}
	other, total, err := OtherBits(src, r, rows)
	if err != nil {
		return r, 0, nil, err
	}
	return Auto(r, rows, other, total, maxBits, maxBytes, perBit)
}

// Presets names the preset recipes.
func Presets() []string { return quant.PresetNames() }

// DefaultPreset is the recipe quantize uses when none is named: of the
// presets, the one of the lowest perplexity among those no larger than
// llama.cpp's Q4_K_M file of the same model, measured on the trained
// models of the test data (docs/quantization.md).
const DefaultPreset = "lpbq4-h6-v8"

// imatrixPrepare reads the importance matrix at path and returns the
// Prepare step that hands its mean squares to the grid search.
func imatrixPrepare(path string) (func(m *arch.Model) (*qmodel.Prepared, error), error) {
	im, err := imatrix.Read(path)
	if err != nil {
		return nil, err
	}
	return func(m *arch.Model) (*qmodel.Prepared, error) {
		g, err := arch.Build(&m.Config, arch.BuildOptions{})
		if err != nil {
			return nil, err
		}
		cols := map[string]int{}
		for _, n := range g.Nodes {
			if n.Op == op.Linear {
				if sh := g.Weights[n.Weight]; len(sh) == 2 {
					cols[n.Weight] = sh[1]
				}
			}
		}
		imp, err := imatrix.ForWeights(im, cols)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &qmodel.Prepared{Importance: imp, GridSearch: true,
			Record: Record{Imatrix: filepath.Base(path), Methods: quant.Calibration{GridSearch: true}}}, nil
	}, nil
}
