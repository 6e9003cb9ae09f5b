// Package imatrix reads llama.cpp's importance matrices (the GGUF files
// llama-imatrix writes: for each weight W, "W.in_sum2", the sum over the
// calibration tokens of each input channel's square, and "W.counts", the
// number of tokens) as the mean square of each input channel, the
// importance quant.SearchGrid weighs a weight's columns by.
package imatrix

import (
	"fmt"
	"math"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/gguf"
)

// Read returns, by the weight names of the file (llama.cpp's), the mean
// square of each input channel. Mixture-of-experts entries (several
// matrices per weight) are refused.
func Read(path string) (map[string][]float64, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("imatrix: %w", err)
	}
	defer f.Close()
	if t, ok := f.Metadata()["general.type"].(string); ok && t != "imatrix" {
		return nil, fmt.Errorf("imatrix %s: general.type is %q, not an importance matrix", path, t)
	}
	out := map[string][]float64{}
	for _, t := range f.Tensors() {
		name, ok := strings.CutSuffix(t.Name, ".in_sum2")
		if !ok {
			continue
		}
		if len(t.Shape) == 2 && t.Shape[0] != 1 {
			return nil, fmt.Errorf("imatrix %s: %s holds %d expert matrices; only dense weights are read", path, t.Name, t.Shape[0])
		}
		sum, err := f.ReadFloat32(t.Name)
		if err != nil {
			return nil, fmt.Errorf("imatrix %s: %w", path, err)
		}
		counts, err := f.ReadFloat32(name + ".counts")
		if err != nil {
			return nil, fmt.Errorf("imatrix %s: %s has no counts: %w", path, name, err)
		}
		if len(counts) != 1 || !(counts[0] > 0) || math.IsInf(float64(counts[0]), 0) {
			return nil, fmt.Errorf("imatrix %s: %s.counts is %v, want one positive count", path, name, counts)
		}
		mean := make([]float64, len(sum))
		for i, v := range sum {
			if !(v >= 0) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("imatrix %s: %s.in_sum2[%d] is %v, want a finite sum of squares", path, name, i, v)
			}
			mean[i] = float64(v) / float64(counts[0])
		}
		out[name] = mean
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("imatrix %s: no .in_sum2 tensor: not an importance matrix", path)
	}
	return out, nil
}

// ForWeights maps the entries of im (by llama.cpp's names or by the
// canonical ones) to the canonical names of the linears whose input
// widths cols gives; a linear without an entry is left out (weighed
// uniformly), an entry of another width is an error.
func ForWeights(im map[string][]float64, cols map[string]int) (map[string][]float64, error) {
	out := map[string][]float64{}
	for name, c := range cols {
		v, ok := im[name]
		if !ok {
			if g, found := arch.GGUFDecoderName(name); found {
				v, ok = im[g]
			}
		}
		if !ok {
			continue
		}
		if len(v) != c {
			return nil, fmt.Errorf("imatrix: %s has %d channels, the model's weight %d inputs", name, len(v), c)
		}
		out[name] = v
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("imatrix: no entry names a linear of this model")
	}
	return out, nil
}
