package qmodel

import (
	"fmt"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/quant"
)

// Load reads a quantized folder as a model whose weights are the
// dequantized values: running it measures exactly the error the
// quantization adds (the integers a compiled artifact computes with
// dequantize to these values). It holds the whole model in float32; Open
// reads a folder tensor by tensor.
func Load(dir string) (*arch.Model, *Manifest, error) {
	f, err := Open(dir)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	w := graph.Weights{}
	for _, name := range f.Names() {
		if w[name], err = f.Float(name); err != nil {
			return nil, nil, err
		}
	}
	// a linear with outlier channels computes W·zero(x) + W_idx·x[idx],
	// which is (W with the columns put back)·x
	for name, idx := range f.Manifest.Outliers {
		main, e := w[name], f.Manifest.Tensors[name]
		outl := w[name+graph.OutlierSuffix]
		if main == nil || outl == nil || len(e.Shape) != 2 || graph.CheckIndex(idx, e.Shape[1]) != nil ||
			len(outl) != e.Shape[0]*len(idx) {
			return nil, nil, fmt.Errorf("quantized model %s: outlier channels of %s do not match its tensors", dir, name)
		}
		graph.PutOutliers(main, e.Shape[0], e.Shape[1], idx, outl)
		delete(w, name+graph.OutlierSuffix)
	}
	return &arch.Model{Config: f.Manifest.Config, Weights: w}, f.Manifest, nil
}

// Folder is an opened quantized folder whose tensors are read one at a
// time. Its methods are safe for concurrent use until Close.
type Folder struct {
	Manifest *Manifest
	dir      string
	ck       *safetensors.Checkpoint
}

// Open reads the manifest of a quantized folder and opens (maps) its
// weights file.
func Open(dir string) (*Folder, error) {
	man, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.Open(filepath.Join(dir, WeightsName))
	if err != nil {
		return nil, err
	}
	return &Folder{Manifest: man, dir: dir, ck: ck}, nil
}

// Close releases the weights file; parts Quantized returned are invalid
// afterwards.
func (f *Folder) Close() error { return f.ck.Close() }

// Names returns the canonical tensor names in sorted order.
func (f *Folder) Names() []string {
	names := make([]string, 0, len(f.Manifest.Tensors))
	for n := range f.Manifest.Tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Float returns the named tensor in float32: a float32 or f16 tensor's
// values, or a quantized one's dequantized values.
func (f *Folder) Float(name string) ([]float32, error) {
	e, ok := f.Manifest.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("quantized model %s: no tensor %s", f.dir, name)
	}
	if e.Float || e.Scheme.Kind == string(quant.KindF16) {
		v, err := readFloat(f.ck, name, e)
		f.ck.Release(name)
		if err != nil {
			return nil, fmt.Errorf("quantized model %s: tensor %s: %w", f.dir, name, err)
		}
		return v, nil
	}
	q, err := f.quantized(name, e, false)
	if err != nil {
		return nil, err
	}
	return q.Dequantize(), nil
}

// Quantized returns the stored parts of a quantized tensor, checked against
// its shape and scheme, or nil for a float32 or f16 tensor. Its integers
// and codes alias the mapped file: they are read-only, valid until Close;
// Release drops their pages once they have been used.
func (f *Folder) Quantized(name string) (*quant.Quantized, error) {
	e, ok := f.Manifest.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("quantized model %s: no tensor %s", f.dir, name)
	}
	if e.Float || e.Scheme.Kind == string(quant.KindF16) {
		return nil, nil
	}
	return f.quantized(name, e, true)
}

// Release drops the mapped pages of the named tensor's parts.
func (f *Folder) Release(name string) {
	for _, p := range []string{name, name + ".q", name + ".scales", name + ".codes", name + ".zeros"} {
		f.ck.Release(p)
	}
}

func readFloat(ck *safetensors.Checkpoint, name string, e TensorEntry) ([]float32, error) {
	n, err := elements(e.Shape)
	if err != nil {
		return nil, err
	}
	v, err := ck.ReadFloat32(name)
	if err == nil && len(v) != n {
		err = fmt.Errorf("%d values for shape %v", len(v), e.Shape)
	}
	return v, err
}

func elements(shape []int) (int, error) {
	if len(shape) == 0 {
		return 0, fmt.Errorf("no shape")
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n, nil
}

// quantized reads the parts of a quantized tensor; with alias set the
// integers, codes and sub-scales alias the file's bytes instead of being copied.
func (f *Folder) quantized(name string, e TensorEntry, alias bool) (*quant.Quantized, error) {
	q, err := readQuantized(f.ck, name, e, alias)
	if !alias {
		f.Release(name)
	}
	if err != nil {
		return nil, fmt.Errorf("quantized model %s: tensor %s: %w", f.dir, name, err)
	}
	return q, nil
}

func readQuantized(ck *safetensors.Checkpoint, name string, e TensorEntry, alias bool) (*quant.Quantized, error) {
	n, err := elements(e.Shape)
	if err != nil {
		return nil, err
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
	if alias {
		q.Q = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw))
	} else {
		q.Q = make([]int8, n)
		for i, b := range raw {
			q.Q[i] = int8(b)
		}
	}
	if q.Scales, err = ck.ReadFloat32(name + ".scales"); err != nil {
		return nil, err
	}
	want := map[string]int{"scales": rows}
	fs := folderSchemes[s.Kind]
	if fs == nil {
		return nil, fmt.Errorf("scheme %v is not stored in quantized model folders", s)
	}
	if err := fs.read(ck, name, q, alias, want); err != nil {
		return nil, err
	}
	got := map[string]int{"scales": len(q.Scales), "codes": len(q.Codes), "zeros": len(q.Zeros)}
	for part, n := range want {
		if got[part] != n {
			return nil, fmt.Errorf("%s has %d values, %v needs %d", part, got[part], s, n)
		}
	}
	return q, nil
}
