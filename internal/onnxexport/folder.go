package onnxexport

import (
	"fmt"
	"sort"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/recipe"
)

// Quantized is a quantized folder opened for a QDQ export: its model
// (dequantized, for the tensors the export keeps float) and the QDQ form
// of its weights, activations and cache. Close releases the folder.
type Quantized struct {
	Model *arch.Model
	QDQ   *QDQ
	// Calibrated says where the activation ranges come from: "recorded"
	// (quantize --calib) or "greedy" (the self-generated sequence the KV
	// calibration uses); "" with float activations.
	Calibrated string
	// Context is the cache size the calibration and the export use.
	Context int
	folder  *qmodel.Folder
}

// Close releases the folder's mapped files.
func (q *Quantized) Close() error { return q.folder.Close() }

// OpenQuantized opens the quantized folder dir for a QDQ export with
// ctx positions (0: DefaultContext, or the trained context if shorter).
// With activations, the linears' inputs get the 16-bit
// ranges the `npu` phase uses (recorded by quantize --calib, else
// calibrated on the greedy sequence), their outputs the 16-bit ranges
// seen over the greedy sequence, and the cache the uint8 scales of its KV
// calibration; without, all stay float.
func OpenQuantized(dir string, ctx int, activations bool) (*Quantized, error) {
	m, man, err := qmodel.Load(dir)
	if err != nil {
		return nil, err
	}
	if len(man.Outliers) > 0 {
		names := make([]string, 0, len(man.Outliers))
		for n := range man.Outliers {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("onnx export: %s keeps outlier channels of %s in float: the QDQ export has no split linear; quantize without outliers", dir, names[0])
	}
	f, err := qmodel.Open(dir)
	if err != nil {
		return nil, err
	}
	ctx = defaultContext(ctx, m.Config.Context)
	q := &Quantized{Model: m, QDQ: &QDQ{Weights: f.Quantized}, Context: ctx, folder: f}
	if activations {
		if q.QDQ.Activations, err = recipe.RecordedRanges(man); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		q.Calibrated = "recorded"
		if q.QDQ.Activations == nil {
			q.Calibrated = "greedy"
			if q.QDQ.Activations, err = qdq.CalibrateRanges(m, nil, ctx); err != nil {
				f.Close()
				return nil, err
			}
		}
		if q.QDQ.Outputs, err = OutputRanges(m, nil, ctx); err != nil {
			f.Close()
			return nil, err
		}
		if q.QDQ.KV, err = qdq.CalibrateKV(m, nil, ctx); err != nil {
			f.Close()
			return nil, err
		}
	}
	return q, nil
}

// CalibrateOn replaces the ranges of the linears' inputs and outputs and
// the cache scales by those seen over ids (the first Context of them, in
// passes of 32 tokens). It does nothing with float activations.
func (q *Quantized) CalibrateOn(ids []int) error {
	if q.QDQ.Activations == nil {
		return nil
	}
	if err := calibrateOn(q.QDQ, q.Model, ids, q.Context); err != nil {
		return err
	}
	q.Calibrated = "text"
	return nil
}

// calibrateOn sets q's ranges and cache scales from m's float graph run
// over ids (nil: the greedy sequence).
func calibrateOn(q *QDQ, m *arch.Model, ids []int, ctx int) error {
	var err error
	if q.Activations, err = qdq.CalibrateRanges(m, ids, ctx); err != nil {
		return err
	}
	if q.Outputs, err = OutputRanges(m, ids, ctx); err != nil {
		return err
	}
	q.KV, err = qdq.CalibrateKV(m, ids, ctx)
	return err
}
