package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotRowsAheadSameBits: the dot kernels that ask ahead as they read
// (an overlay's dotRowsAF16 and dotRowsAU8, run through
// dotRowsMultiAhead as DotRowsF16MultiAhead runs them) give every vector
// the bits that the overlay's plain kernels give it (dotRowsMulti), for
// 1 to 9 vectors (groups of four and a rest of one), every n and rows
// count (odd ones: the masked tails), padded strides, the rows asked for
// before or after the rows read, and write nothing outside each
// destination's rows. Overlays without such kernels take the fallback,
// which must agree too.
func TestDotRowsAheadSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(67, 68))
	kernels := 0
	for _, o := range Overlays() {
		if !o.Supported {
			continue
		}
		if o.DotRowsF16 != nil {
			kernels += checkDotRowsAhead(t, r, o.Name+"/f16", o.dotRowsMF16, o.dotRowsAF16, o.DotRowsF16, randHalves)
		}
		if o.DotRowsU8 != nil {
			kernels += checkDotRowsAhead(t, r, o.Name+"/u8", o.dotRowsMU8, o.dotRowsAU8, o.DotRowsU8, randBytes)
		}
	}
	t.Logf("%d kernels that ask ahead checked", kernels)
}

func checkDotRowsAhead[E multiElem](t *testing.T, r *rand.Rand, name string, kerns [attnMultiMax + 1]rowsMKernel[E], ahead [attnMultiMax + 1]rowsAheadKernel[E],
	one func(dst, w []float32, y []E, stride int), rowsOf func(*rand.Rand, int) []E) int {
	names := &multiNames{name + " dst", name + " w", name}
	for _, m := range []int{1, 2, 3, 4, 5, 9} {
		for _, n := range []int{1, 15, 16, 17, 32, 33, 64, 100, 128, 257} {
			for _, rows := range []int{1, 2, 3, 8, 65} {
				ldd, ldw, stride := rows+3, n+5, n+9
				span := (rows-1)*stride + n
				all := rowsOf(r, 2*span+37)
				w := randFloats(r, (m-1)*ldw+n, 1)
				for _, after := range []bool{true, false} {
					y, next := all[:span], all[span+37:]
					if !after {
						y, next = next, y
					}
					want := make([]float32, (m-1)*ldd+rows+4)
					got := make([]float32, len(want))
					for i := range got {
						want[i], got[i] = guard, guard
					}
					dotRowsMulti(names, &kerns, one, want, ldd, rows, w, ldw, n, m, y, stride)
					dotRowsMultiAhead(names, &kerns, &ahead, one, got, ldd, rows, w, ldw, n, m, y, stride, next)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("%s m %d n %d rows %d (next after %v): element %d: %v plain, %v asking ahead", name, m, n, rows, after, i, want[i], got[i])
						}
					}
				}
			}
		}
	}
	count := 0
	for _, k := range ahead {
		if k != nil {
			count++
		}
	}
	return count
}

// TestDotRowsMultiAhead: the exported forms on the selected kernels give
// DotRowsF16Multi's (DotRowsU8Multi's) bits whatever next is: the value
// rows after the keys, a next shorter than the rows' span, or none; and
// they check their spans as DotRowsF16Multi does.
func TestDotRowsMultiAhead(t *testing.T) {
	r := rand.New(rand.NewPCG(69, 70))
	const E, rows, m = 128, 77, 3
	ld := rows
	k, v := randHalves(r, rows*E), randHalves(r, rows*E)
	ku, vu := randBytes(r, rows*E), randBytes(r, rows*E)
	q := randFloats(r, m*E, 1)
	checkMultiAhead(t, "f16", DotRowsF16Multi, DotRowsF16MultiAhead, q, k, [][]uint16{v, v[:rows*E/2], nil})
	checkMultiAhead(t, "u8", DotRowsU8Multi, DotRowsU8MultiAhead, q, ku, [][]uint8{vu, vu[:1], nil})
	defer func() {
		if recover() == nil {
			t.Fatal("rows past the keys' end did not panic")
		}
	}()
	DotRowsF16MultiAhead(make([]float32, m*ld), ld, rows, q, E, E, m, k[:rows*E-1], E, v)
}

// checkMultiAhead compares ahead with plain, 3 queries of 128 against 77
// rows of y, for each next.
func checkMultiAhead[V multiElem](t *testing.T, name string,
	plain func(dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []V, stride int),
	ahead func(dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []V, stride int, next []V),
	q []float32, y []V, nexts [][]V) {
	const E, rows, m = 128, 77, 3
	for _, next := range nexts {
		want, got := make([]float32, m*rows), make([]float32, m*rows)
		plain(want, rows, rows, q, E, E, m, y, E)
		ahead(got, rows, rows, q, E, E, m, y, E, next)
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%s, next of %d: score %d: %v, %v asking ahead", name, len(next), i, want[i], got[i])
			}
		}
	}
}

// TestAxpyRowsAheadSameBits: the axpy kernels that ask ahead as they
// read give every vector the bits of the plain multi-vector kernels
// (axpyRowsMultiAhead as AxpyRowsF16MultiAhead runs them), for every
// supported overlay, binary16 and uint8 rows, next before or after the
// rows, and next too short (no asking).
func TestAxpyRowsAheadSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	kernels := 0
	for _, o := range Overlays() {
		if !o.Supported || o.AxpyRowsF16 == nil {
			continue
		}
		kernels += checkAxpyRowsAhead(t, r, o.Name+"/f16", o.axpyRowsMF16, o.axpyRowsAF16, o.AxpyRowsF16, randHalves)
		kernels += checkAxpyRowsAhead(t, r, o.Name+"/u8", o.axpyRowsMU8, o.axpyRowsAU8, o.AxpyRowsU8, randBytes)
	}
	t.Logf("%d axpy kernels that ask ahead checked", kernels)
}

func checkAxpyRowsAhead[E multiElem](t *testing.T, r *rand.Rand, name string, kerns [attnMultiMax + 1]rowsMKernel[E], ahead [attnMultiMax + 1]rowsAheadKernel[E],
	one func(dst, alpha []float32, x []E, stride int), rowsOf func(*rand.Rand, int) []E) int {
	names := &multiNames{name + " dst", name + " alpha", name}
	for _, m := range []int{1, 2, 3, 4, 5, 9} {
		for _, n := range []int{1, 15, 16, 17, 32, 33, 64, 100, 128, 257} {
			for _, rows := range []int{1, 2, 3, 8, 65} {
				ldd, lda, stride := n+3, rows+5, n+9
				span := (rows-1)*stride + n
				all := rowsOf(r, 2*span+37)
				alpha := randFloats(r, (m-1)*lda+rows, 1)
				for _, mode := range []string{"after", "before", "short"} {
					x, next := all[:span], all[span+37:]
					switch mode {
					case "before":
						x, next = next, x
					case "short":
						next = next[:span-1]
					}
					want := randFloats(r, (m-1)*ldd+n+4, 1)
					got := append([]float32(nil), want...)
					axpyRowsMulti(names, &kerns, one, want, ldd, n, alpha, lda, rows, m, x, stride)
					axpyRowsMultiAhead(names, &kerns, &ahead, one, got, ldd, n, alpha, lda, rows, m, x, stride, next)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("%s m %d n %d rows %d (next %s): element %d: %v plain, %v asking ahead", name, m, n, rows, mode, i, want[i], got[i])
						}
					}
				}
			}
		}
	}
	count := 0
	for _, k := range ahead {
		if k != nil {
			count++
		}
	}
	return count
}
