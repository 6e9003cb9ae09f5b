package recipe

import (
	"encoding/json"
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/calib"
	"github.com/aotlm/aotlm/internal/eval"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/rotate"
)

// CalibOptions say what a recipe's calibration runs on: Samples windows
// of Len tokens of the text File, tokenized with Tokenizer (a tokenizer
// file or a model path), on Threads threads.
type CalibOptions struct {
	File         string
	Samples, Len int
	Tokenizer    string
	Threads      int
}

// Samples tokenizes the calibration file once and cuts o.Samples windows
// of o.Len tokens spread evenly over it (fewer when the text is short),
// each started with BOS when the tokenizer adds one.
func Samples(o CalibOptions) ([][]int, error) {
	text, err := userfile.ReadFile(o.File, userfile.Calibration)
	if err != nil {
		return nil, err
	}
	tok, err := load.Tokenizer(o.Tokenizer, o.Tokenizer)
	if err != nil {
		return nil, err
	}
	ids, bos, err := eval.Tokenize(tok, string(text))
	if err != nil {
		return nil, err
	}
	if o.Samples < 1 || o.Len < 2 {
		return nil, fmt.Errorf("--calib-samples %d and --calib-len %d: want at least 1 sample of 2 tokens", o.Samples, o.Len)
	}
	if len(ids) < o.Len {
		return nil, fmt.Errorf("calibration text %s has %d tokens, fewer than --calib-len %d", o.File, len(ids), o.Len)
	}
	n := min(o.Samples, len(ids)/o.Len)
	out := make([][]int, n)
	for i := range out {
		start := 0
		if n > 1 {
			start = i * (len(ids) - o.Len) / (n - 1)
		}
		out[i] = append([]int(nil), ids[start:start+o.Len]...)
		if bos >= 0 {
			out[i][0] = bos
		}
	}
	return out, nil
}

// Record is what a quantized model's manifest holds under "calibration".
type Record struct {
	Rotation *rotate.Report `json:"rotation,omitempty"`
	Text     string         `json:"text,omitempty"`
	// Imatrix names the llama.cpp importance matrix the grid search was
	// weighted by, when one replaced the calibration pass.
	Imatrix string              `json:"imatrix,omitempty"`
	Samples int                 `json:"samples,omitempty"`
	Tokens  int                 `json:"tokens,omitempty"`
	Methods quant.Calibration   `json:"methods"`
	Groups  []calib.GroupReport `json:"groups,omitempty"`
	// Ranges are the calibrated input ranges of every linear, by weight
	// (static activation quantization), without its outlier channels.
	Ranges map[string][2]float32 `json:"ranges,omitempty"`
	// Outliers counts the input channels kept in float, by weight.
	Outliers map[string]int `json:"outlier_channels,omitempty"`
}

// Prepare returns quantize's Prepare step for a recipe: rotations, then
// calibration and the calibrated methods; nil when the recipe needs none
// and o names no calibration text.
func Prepare(r quant.Recipe, o CalibOptions) (func(*arch.Model) (*qmodel.Prepared, error), error) {
	rot := r.Rotation != (quant.Rotation{})
	if !rot && !r.Calibration.Needed() && o.File == "" {
		return nil, nil
	}
	if r.Calibration.Needed() && o.File == "" {
		return nil, fmt.Errorf("recipe %s uses calibrated methods (awq, smooth_alpha, gptq, grid_search, outliers): pass --calib <text file>", r.Name)
	}
	return func(m *arch.Model) (*qmodel.Prepared, error) {
		rec := Record{Methods: r.Calibration}
		prep := &qmodel.Prepared{Record: &rec, GPTQ: quant.GPTQOptions{Damp: r.Calibration.GPTQDamp, ActOrder: r.Calibration.GPTQActOrder, Refit: r.Calibration.GPTQRefit}}
		if rot {
			rep, err := rotate.Apply(m, rotate.Options{R1: r.Rotation.R1, R2: r.Rotation.R2, R3: r.Rotation.R3, R4: r.Rotation.R4, Seed: r.Rotation.Seed})
			if err != nil {
				return nil, err
			}
			rec.Rotation = rep
		}
		if o.File == "" {
			return prep, nil
		}
		samples, err := Samples(o)
		if err != nil {
			return nil, err
		}
		st, err := calib.Collect(m, samples, calib.Options{Hessian: r.Calibration.GPTQ, Threads: o.Threads})
		if err != nil {
			return nil, err
		}
		rec.Text, rec.Samples, rec.Tokens = filepath.Base(o.File), st.Samples, st.Tokens
		meth := calib.Methods{SmoothAlpha: r.Calibration.SmoothAlpha, AWQ: r.Calibration.AWQ, AWQGrid: r.Calibration.AWQGrid}
		if rec.Groups, err = calib.Scale(m, st, r.SchemeFor, meth); err != nil {
			return nil, err
		}
		if r.Calibration.Sequential {
			copts := calib.Options{Hessian: r.Calibration.GPTQ, Threads: o.Threads}
			if err := calib.Sequential(m, st, samples, copts, sequentialQuantizer(r, st, prep.GPTQ)); err != nil {
				return nil, err
			}
		}
		rec.Ranges = map[string][2]float32{}
		prep.GridSearch = r.Calibration.GridSearch
		for name, in := range st.ByWeight {
			rec.Ranges[name] = [2]float32{in.Min, in.Max}
			idx := outlierChannels(r, name, in, st)
			if idx != nil {
				if prep.Outliers == nil {
					prep.Outliers, rec.Outliers = map[string][]int{}, map[string]int{}
				}
				prep.Outliers[name], rec.Outliers[name] = idx, len(idx)
				rec.Ranges[name] = rangeWithout(in, idx)
			}
			if r.Calibration.GridSearch {
				if prep.Importance == nil {
					prep.Importance = map[string][]float64{}
				}
				prep.Importance[name] = in.MeanSq()
			}
			if r.Calibration.GPTQ {
				if prep.Hessians == nil {
					prep.Hessians = map[string][]float64{}
				}
				prep.Hessians[name] = in.H
				if idx != nil {
					// the quantized linear reads zeros at the outlier
					// channels: they are dead inputs to GPTQ
					h := append([]float64(nil), in.H...)
					for _, c := range idx {
						for j := range in.Cols {
							h[c*in.Cols+j], h[j*in.Cols+c] = 0, 0
						}
					}
					prep.Hessians[name] = h
				}
			}
		}
		return prep, nil
	}, nil
}

// sequentialQuantizer quantizes a weight as quantize will (the recipe's
// scheme, a tied table taking the classifier's, then the grid search and
// GPTQ the recipe asks for) and returns its dequantized values.
func sequentialQuantizer(r quant.Recipe, st *calib.Stats, gopts quant.GPTQOptions) calib.QuantizeFunc {
	embeds := map[string]bool{}
	for _, n := range st.Graph.Nodes {
		if n.Op == op.Embed {
			embeds[n.Weight] = true
		}
	}
	return func(name string, w []float32, in *calib.Input) ([]float32, error) {
		s := r.SchemeFor(name)
		if embeds[name] { // only linears get here: a tied table
			s = r.SchemeFor("lm_head.weight")
		}
		q, err := quant.Quantize(w, len(w)/in.Cols, in.Cols, quant.FitWidth(s, in.Cols))
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		if r.Calibration.GridSearch {
			if err := quant.SearchGrid(q, w, in.MeanSq()); err != nil {
				return nil, err
			}
		}
		if r.Calibration.GPTQ {
			if err := quant.GPTQOnGrid(q, w, in.H, gopts); err != nil {
				return nil, err
			}
		}
		return q.Dequantize(), nil
	}
}

// outlierChannels picks the input channels of linear weight name that the
// recipe keeps in float: only for a weight quantized to a layout the int8
// activation kernels run (w8, lpbq, q4 in blocks of 32 over a width that
// is a multiple of 32), never for an embedding table.
func outlierChannels(r quant.Recipe, name string, in *calib.Input, st *calib.Stats) []int {
	c := r.Calibration
	if !(c.Outliers > 0) || in.Cols%32 != 0 {
		return nil
	}
	for _, n := range st.Graph.Nodes {
		if n.Op == op.Embed && n.Weight == name {
			return nil
		}
	}
	s := r.SchemeFor(name)
	if s.FloatInput {
		return nil
	}
	switch s.Kind {
	case quant.KindW8, quant.KindLPBQ, quant.KindLPBQ5, quant.KindQ4:
	default:
		return nil
	}
	if s.Block%32 != 0 {
		return nil
	}
	return calib.OutlierChannels(in.MaxAbs, c.Outliers, c.OutlierRatio)
}

// rangeWithout is in's calibrated range once the channels idx are zeroed:
// the recorded extremes clipped to the largest |x| of the other channels
// (and holding 0).
func rangeWithout(in *calib.Input, idx []int) [2]float32 {
	skip := map[int]bool{}
	for _, c := range idx {
		skip[c] = true
	}
	var m float64
	for j, v := range in.MaxAbs {
		if !skip[j] {
			m = max(m, v)
		}
	}
	return [2]float32{min(max(in.Min, -float32(m)), 0), max(min(in.Max, float32(m)), 0)}
}

// RecordedRanges returns the linear input ranges a quantized folder's
// calibration recorded, or nil.
func RecordedRanges(man *qmodel.Manifest) (map[string]qdq.Range, error) {
	if len(man.Calibration) == 0 {
		return nil, nil
	}
	var rec Record
	if err := json.Unmarshal(man.Calibration, &rec); err != nil {
		return nil, fmt.Errorf("manifest calibration: %w", err)
	}
	if len(rec.Ranges) == 0 {
		return nil, nil
	}
	out := make(map[string]qdq.Range, len(rec.Ranges))
	for name, r := range rec.Ranges {
		out[name] = qdq.Range{Min: r[0], Max: r[1]}
	}
	return out, nil
}
