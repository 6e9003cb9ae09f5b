package recipe

import (
	"runtime/debug"

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
	// Progress, when not nil, is called after each tensor with the
	// tensors and bytes done of their totals.
	Progress func(done, total int, bytes, totalBytes int64)
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
	if prepare != nil {
		// rotations and calibration hold the whole model in float32, and
		// GPTQ its inputs' Hessians: collect garbage at 25% growth rather
		// than Go's default 100%, so the peak stays near what is live
		// (their slices hold no pointers, so the extra collections are
		// cheap)
		defer debug.SetGCPercent(debug.SetGCPercent(25))
	}
	opts := qmodel.Options{Recipe: r, Tokenizer: o.Tokenizer, FallbackW8: o.FallbackW8, Force: o.Force, Jobs: o.Jobs, Prepare: prepare}
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
