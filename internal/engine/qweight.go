package engine

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// qweight is a quantized weight W [N, K] viewed in place in the artifact
// (plan.WeightLayout gives the byte layout and the dequantization rule).
// Its family's binding (weightBinding) views the parts and chooses the
// kernels once, at load: a linear calls them with no switch on the
// layout.
type qweight struct {
	kind   plan.LayoutKind
	N, K   int
	block  int       // B or G; 0 for w8
	nb     int       // blocks (groups) per row
	q      []int8    // [N*K]
	codes  []uint8   // [N*nb] lpbq
	scales []float32 // [N] (w8, lpbq) or [N*nb] (q4)
	zeros  []float32 // [N*nb] q4 asymmetric, else nil
	// A binary16 weight (layout f16-rows) is h [N*K] instead.
	h []uint16

	// matMul, on a packed weight (layout tag "-p"), is its kernel's
	// product with int8 activations; forQ4 and forW8 tell which
	// activation records it reads (kernel.Q8.Begin).
	matMul       func(dst []float32, ldd int, x *kernel.Q8, n0, n1 int)
	forQ4, forW8 bool
	// runPlain, on an unpacked weight other than binary16, is its
	// product dequantizing in the loop (linearJob.run).
	runPlain func(l *linearJob, j0, j1 int)
	// rowOf writes the dequantized row n into dst [K].
	rowOf func(dst []float32, n int)
}

// weightBinding is one layout family's entry in the engine's table: how
// a weight of that family is viewed and which kernels run it. Each
// family's entry is in the file named for its scheme (linear_q4k.go,
// ...).
type weightBinding struct {
	kind plan.LayoutKind
	// packed views a packed weight's parts and binds matMul and rowOf
	// (nil: the family has no packed form).
	packed func(w *qweight, p plan.Parts, data []byte) error
	// plain views an unpacked weight's parts (nil: no unpacked form).
	plain func(w *qweight, p plan.Parts, data []byte)
	// bindPlain binds runPlain and rowOf of an unpacked weight whose
	// parts are viewed.
	bindPlain func(w *qweight)
}

// weightBindings is the engine's layout table, filled by each family's file.
var weightBindings = map[plan.LayoutKind]*weightBinding{}

// registerBinding adds a family's entry; a second entry is a bug.
func registerBinding(b *weightBinding) {
	if _, dup := weightBindings[b.kind]; dup {
		panic(fmt.Sprintf("engine: layout kind %d bound twice", b.kind))
	}
	weightBindings[b.kind] = b
}

// packed reports whether w is in a packed layout.
func (w *qweight) packed() bool { return w.matMul != nil }

// newQWeight checks a quantized tensor's descriptor and size and views its
// parts.
func newQWeight(info artifact.TensorInfo, data []byte) (*qweight, error) {
	l, err := plan.ParseLayout(info.Layout)
	if err != nil {
		return nil, &UnsupportedError{Msg: fmt.Sprintf("tensor %q: %v", info.Name, err)}
	}
	b := weightBindings[l.Kind]
	if b == nil || (l.Packed && b.packed == nil) || (!l.Packed && b.plain == nil) {
		return nil, &UnsupportedError{Msg: fmt.Sprintf("tensor %q: layout %s has no kernel", info.Name, info.Layout)}
	}
	want := tensor.I8
	if l.Half() {
		want = tensor.F16
	}
	if info.DType != want || len(info.Shape) != 2 {
		return nil, fmt.Errorf("tensor %q: layout %s needs dtype %v and rank 2, has %v %v", info.Name, info.Layout, want, info.DType, info.Shape)
	}
	p, err := l.Parts(info.Shape[0], info.Shape[1])
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", info.Name, err)
	}
	if int64(len(data)) != p.Size {
		return nil, fmt.Errorf("tensor %q: %d bytes, layout %s of %v needs %d", info.Name, len(data), info.Layout, info.Shape, p.Size)
	}
	w := &qweight{kind: l.Kind, N: int(info.Shape[0]), K: int(info.Shape[1]), block: l.Block}
	if l.Packed {
		if err := b.packed(w, p, data); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", info.Name, err)
		}
		return w, nil
	}
	if l.Block > 0 {
		w.nb = (w.K + l.Block - 1) / l.Block
	}
	b.plain(w, p, data)
	b.bindPlain(w)
	return w, nil
}

// row writes the dequantized row n of w into dst [K], by the rule of its
// layout (plan.WeightLayout).
func (w *qweight) row(dst []float32, n int) { w.rowOf(dst, n) }
