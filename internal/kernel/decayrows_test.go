package kernel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestDecayRowsMatchesGeneric checks every supported overlay's DecayRows
// against the plain loop on random inputs: widths with and without a
// vector tail, one to 130 rows, in place and out of place, the new state
// on a 64-byte boundary and off it. Budgets, with
// eps = 2^-23: a state element within 4·eps·(|decay·x| + |k·m|) (the
// overlays fuse the k·m product into the sum, the loop may round it),
// an element of o within (rows+4)·eps times the sum of the magnitudes of
// its terms (its initial value and each row's q·s, added in the same
// order by both).
func TestDecayRowsMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const eps = 0x1p-23
	tested := 0
	for _, ov := range Overlays() {
		if !ov.Supported || ov.DecayRows == nil {
			continue
		}
		tested++
		for _, n := range []int{1, 7, 8, 13, 16, 24, 100, 128, 130, 200} {
			for _, rows := range []int{1, 3, 64, 130} {
				for _, inPlace := range []bool{false, true} {
					x := randFloats(r, rows*n, 1)
					m, o0 := randFloats(r, n, 1), randFloats(r, n, 1)
					k, q := randFloats(r, rows, 1), randFloats(r, rows, 1)
					decay := r.Float32()
					var next []float32 // the rows of another state, or none
					if rows%2 == 1 {
						next = randFloats(r, rows*n, 1)
					}
					want, oWant := make([]float32, rows*n), slices.Clone(o0)
					decayRowsGeneric(want, x, oWant, m, k, q, decay, nil)
					// the new state on a 64-byte boundary (the overlays'
					// non-temporal stores) or one element past it
					got, oGot := aligned64(rows*n, rows%2), slices.Clone(o0)
					src := x
					if inPlace {
						copy(got, x)
						src = got
					}
					ov.DecayRows(got, src, oGot, m, k, q, decay, next)
					for i := range want {
						rr, c := i/n, i%n
						mag := math.Abs(float64(decay*x[i])) + math.Abs(float64(k[rr]*m[c]))
						if d := math.Abs(float64(got[i] - want[i])); d > 4*eps*mag {
							t.Fatalf("%s n %d rows %d in place %v: state[%d] %g, want %g", ov.Name, n, rows, inPlace, i, got[i], want[i])
						}
					}
					for c := range oWant {
						sum := math.Abs(float64(o0[c]))
						for rr := range rows {
							s := math.Abs(float64(decay*x[rr*n+c])) + math.Abs(float64(k[rr]*m[c]))
							sum += math.Abs(float64(q[rr])) * s
						}
						if d := math.Abs(float64(oGot[c] - oWant[c])); d > float64(rows+4)*eps*sum {
							t.Fatalf("%s n %d rows %d in place %v: o[%d] %g, want %g (terms %g)", ov.Name, n, rows, inPlace, c, oGot[c], oWant[c], sum)
						}
					}
				}
			}
		}
	}
	if tested == 0 {
		t.Logf("no overlay with DecayRows on this CPU (%s): the generic loop is the one in use", Active())
	}
}

// aligned64 returns n zeros starting off elements past a 64-byte
// boundary.
func aligned64(n, off int) []float32 {
	b := make([]float32, n+off+16)
	skip := int((64 - uintptr(unsafe.Pointer(&b[0]))%64) % 64 / 4)
	return b[skip+off : skip+off+n]
}

// TestDecayRowsRule checks the plain loop itself on a worked case, and
// that DecayRows with short slices panics before writing.
func TestDecayRowsRule(t *testing.T) {
	x := []float32{1, 2, 3, 4} // two rows of two
	dst, o := make([]float32, 4), []float32{10, 20}
	DecayRows(dst, x, o, []float32{1, -1}, []float32{2, 3}, []float32{1, 0.5}, 0.5, nil)
	// row 0: 0.5*[1 2] + 2*[1 -1] = [2.5 -1]; row 1: 0.5*[3 4] + 3*[1 -1] = [4.5 -1]
	if want := []float32{2.5, -1, 4.5, -1}; !slices.Equal(dst, want) {
		t.Errorf("state %v, want %v", dst, want)
	}
	if want := []float32{10 + 2.5 + 0.5*4.5, 20 - 1 - 0.5}; !slices.Equal(o, want) {
		t.Errorf("o %v, want %v", o, want)
	}
	short := make([]float32, 3)
	defer func() {
		if recover() == nil {
			t.Error("a state of 3 elements for 2 rows of 2: no panic")
		}
		if !slices.Equal(short, make([]float32, 3)) {
			t.Errorf("a panicking call wrote %v", short)
		}
	}()
	DecayRows(short, x, o, []float32{1, -1}, []float32{2, 3}, []float32{1, 0.5}, 0.5, x)
}
