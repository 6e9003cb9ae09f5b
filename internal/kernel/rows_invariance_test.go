package kernel

import (
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// TestDotRowsSameWhateverRows: a row's dot product is bit-identical
// whether DotRows takes the row alone or among others, in every position
// of a group, for every overlay's version. The engine's float32 linears
// rely on it: a session decoded in a batch gets exactly the logits it
// gets alone, and prefill agrees with decode.
func TestDotRowsSameWhateverRows(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	impls := map[string]func(dst, w, y []float32, stride int){"exported": DotRows, "generic": dotRowsGeneric}
	for _, o := range Overlays() {
		if o.Supported && o.DotRows != nil {
			impls[o.Name] = o.DotRows
		}
	}
	for name, dot := range impls {
		for _, n := range []int{1, 7, 16, 64, 100, 172, 1024} {
			for _, R := range []int{2, 3, 4, 5, 8, 9} {
				w := randFloats(r, n, 1)
				y := randFloats(r, R*n, 1)
				all := make([]float32, R)
				dot(all, w, y, n)
				for i := range R {
					one := make([]float32, 1)
					dot(one, w, y[i*n:(i+1)*n], n)
					if one[0] != all[i] {
						t.Fatalf("%s: n %d, row %d of %d: %v alone, %v among %d rows", name, n, i, R, one[0], all[i], R)
					}
				}
			}
		}
	}
}

// TestDotRowsF16WSameWhateverRows is TestDotRowsSameWhateverRows for the
// binary16-weight row kernel (the engine's binary16 linears).
func TestDotRowsF16WSameWhateverRows(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	impls := map[string]func(dst []float32, w []uint16, y []float32, stride int){"exported": DotRowsF16W, "generic": dotRowsF16WGeneric}
	for _, o := range Overlays() {
		if o.Supported && o.DotRowsF16W != nil {
			impls[o.Name] = o.DotRowsF16W
		}
	}
	for name, dot := range impls {
		for _, n := range []int{1, 7, 16, 64, 100, 172, 1024} {
			for _, R := range []int{2, 3, 4, 5, 8, 9} {
				w := make([]uint16, n)
				for j, v := range randFloats(r, n, 1) {
					w[j] = tensor.F32ToF16(v)
				}
				y := randFloats(r, R*n, 1)
				all := make([]float32, R)
				dot(all, w, y, n)
				for i := range R {
					one := make([]float32, 1)
					dot(one, w, y[i*n:(i+1)*n], n)
					if one[0] != all[i] {
						t.Fatalf("%s: n %d, row %d of %d: %v alone, %v among %d rows", name, n, i, R, one[0], all[i], R)
					}
				}
			}
		}
	}
}
