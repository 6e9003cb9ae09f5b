package qmodel

import (
	"fmt"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/quant"
)

// Load reads a quantized folder as a model whose weights are the
// dequantized values: running it measures exactly the error the
// quantization adds (the integers a compiled artifact computes with
// dequantize to these values).
func Load(dir string) (*arch.Model, *Manifest, error) {
	man, err := ReadManifest(dir)
	if err != nil {
		return nil, nil, err
	}
	ck, err := safetensors.Open(filepath.Join(dir, WeightsName))
	if err != nil {
		return nil, nil, err
	}
	defer ck.Close()
	w := graph.Weights{}
	for name, e := range man.Tensors {
		v, err := readTensor(ck, name, e)
		if err != nil {
			return nil, nil, fmt.Errorf("quantized model %s: tensor %q: %w", dir, name, err)
		}
		w[name] = v
	}
	return &arch.Model{Config: man.Config, Weights: w}, man, nil
}

func readTensor(ck *safetensors.Checkpoint, name string, e TensorEntry) ([]float32, error) {
	if len(e.Shape) == 0 {
		return nil, fmt.Errorf("no shape")
	}
	n := 1
	for _, d := range e.Shape {
		n *= d
	}
	if e.Float || e.Scheme.Kind == string(quant.KindF16) {
		v, err := ck.ReadFloat32(name)
		if err == nil && len(v) != n {
			err = fmt.Errorf("%d values for shape %v", len(v), e.Shape)
		}
		return v, err
	}
	if len(e.Shape) != 2 {
		return nil, fmt.Errorf("quantized tensor of shape %v", e.Shape)
	}
	s := e.Scheme.Quant()
	rows, cols := e.Shape[0], e.Shape[1]
	q := &quant.Quantized{Scheme: s, Rows: rows, Cols: cols, Padded: e.Padded}
	raw, err := ck.Bytes(name + ".q")
	if err != nil {
		return nil, err
	}
	if len(raw) != n {
		return nil, fmt.Errorf("%d integers for shape %v", len(raw), e.Shape)
	}
	q.Q = make([]int8, n)
	for i, b := range raw {
		q.Q[i] = int8(b)
	}
	if q.Scales, err = ck.ReadFloat32(name + ".scales"); err != nil {
		return nil, err
	}
	blocks := 1
	if s.Block > 0 {
		blocks = (cols + s.Block - 1) / s.Block
	}
	want := map[string]int{"scales": rows}
	switch s.Kind {
	case quant.KindLPBQ:
		c, err := ck.Bytes(name + ".codes")
		if err != nil {
			return nil, err
		}
		q.Codes = append([]uint8(nil), c...)
		want["codes"] = rows * blocks
	case quant.KindQ4:
		want["scales"] = rows * blocks
		if !s.Sym {
			if q.Zeros, err = ck.ReadFloat32(name + ".zeros"); err != nil {
				return nil, err
			}
			want["zeros"] = rows * blocks
		}
	}
	got := map[string]int{"scales": len(q.Scales), "codes": len(q.Codes), "zeros": len(q.Zeros)}
	for part, n := range want {
		if got[part] != n {
			return nil, fmt.Errorf("%s has %d values, %v needs %d", part, got[part], s, n)
		}
	}
	return q.Dequantize(), nil
}
