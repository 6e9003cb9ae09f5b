package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// rowsTolerance is the budget of every row kernel's output against a
// float64 sum of the same terms: relative to Σ|terms| of that output.
const rowsTolerance = 1e-5

// rowsImpl is one implementation of the six row kernels.
type rowsImpl struct {
	name        string
	axpyRows    func(dst, alpha, x []float32, stride int)
	dotRows     func(dst, w, y []float32, stride int)
	axpyRowsF16 func(dst, alpha []float32, x []uint16, stride int)
	dotRowsF16  func(dst, w []float32, y []uint16, stride int)
	axpyRowsU8  func(dst, alpha []float32, x []uint8, stride int)
	dotRowsU8   func(dst, w []float32, y []uint8, stride int)
	dotRowsF16W func(dst []float32, w []uint16, y []float32, stride int)
}

// rowsImpls lists the generic kernels, the exported (dispatched) ones and
// every supported overlay that has them.
func rowsImpls(t testing.TB) []rowsImpl {
	out := []rowsImpl{
		{"generic", axpyRowsGeneric, dotRowsGeneric, axpyRowsF16Generic, dotRowsF16Generic, axpyRowsU8Generic, dotRowsU8Generic, dotRowsF16WGeneric},
		{"exported", AxpyRows, DotRows, AxpyRowsF16, DotRowsF16, AxpyRowsU8, DotRowsU8, DotRowsF16W},
	}
	for _, o := range Overlays() {
		if !o.Supported {
			t.Logf("overlay %s: not supported by this CPU, not tested", o.Name)
			continue
		}
		im := rowsImpl{o.Name, o.AxpyRows, o.DotRows, o.AxpyRowsF16, o.DotRowsF16, o.AxpyRowsU8, o.DotRowsU8, o.DotRowsF16W}
		if im.axpyRows == nil || im.dotRows == nil || im.axpyRowsF16 == nil || im.dotRowsF16 == nil ||
			im.axpyRowsU8 == nil || im.dotRowsU8 == nil || im.dotRowsF16W == nil {
			t.Logf("overlay %s: no row kernels", o.Name)
			continue
		}
		out = append(out, im)
	}
	return out
}

// rowsData is one case: R rows of n elements at stride, as float32,
// binary16 and biased bytes, NaN in the gaps between rows and after the
// last one (a read outside the rows poisons the output; for bytes the
// gaps hold 0, the value -128, far from any row's values).
type rowsData struct {
	n, R, stride int
	x            []float32 // [(R-1)*stride+n], unaligned start
	h            []uint16  // x as binary16, same layout
	xh           []float32 // h widened
	u            []uint8   // random bytes in 64..192, same layout
	xu           []float32 // the values of u
	v            []float32 // alpha [R] or w [n]: both drawn, unaligned
	w            []float32
	wh           []uint16  // w as binary16 (DotRowsF16W), unaligned
	xw           []float32 // wh widened
}

func newRowsData(r *rand.Rand, n, R, stride int) *rowsData {
	d := &rowsData{n: n, R: R, stride: stride}
	span := 0
	if n > 0 && R > 0 {
		span = (R-1)*stride + n
	}
	off := r.IntN(4)
	nan := float32(math.NaN())
	buf := make([]float32, off+span+16)
	hbuf := make([]uint16, off+span+16)
	for i := range buf {
		buf[i], hbuf[i] = nan, 0x7e00
	}
	d.x, d.h = buf[off:off+span], hbuf[off:off+span]
	d.u = make([]uint8, off+span+16)[off : off+span]
	d.xh, d.xu = make([]float32, span), make([]float32, span)
	for i := range d.xh {
		d.xh[i], d.xu[i] = nan, nan
	}
	for row := range R {
		for j := range n {
			k := row*stride + j
			v := float32(r.NormFloat64())
			if v == 0 {
				v = 0.5
			}
			d.x[k] = v
			d.h[k] = tensor.F32ToF16(v)
			d.xh[k] = tensor.F16ToF32(d.h[k])
			d.u[k] = uint8(64 + r.IntN(129))
			if d.u[k] == U8Bias {
				d.u[k]++
			}
			d.xu[k] = float32(int(d.u[k]) - U8Bias)
		}
	}
	d.v = randFloats(r, R+3, 1)[r.IntN(4):][:R]
	d.w = randFloats(r, n+3, 1)[r.IntN(4):][:n]
	d.wh, d.xw = make([]uint16, n+3)[r.IntN(4):][:n], make([]float32, n)
	for j, v := range d.w {
		d.wh[j] = tensor.F32ToF16(v)
		d.xw[j] = tensor.F16ToF32(d.wh[j])
	}
	return d
}

// guarded returns a slice of n values copied from init at an unaligned
// start, with guard values after it.
func guarded(r *rand.Rand, init []float32, n int) []float32 {
	off := 1 + r.IntN(4)
	buf := make([]float32, off+n+2)
	for i := range buf {
		buf[i] = guard
	}
	s := buf[off : off+n]
	copy(s, init)
	return s
}

// checkGuards fails unless the guard values after s (made by guarded)
// are intact.
func checkGuards(t *testing.T, what string, s []float32) {
	t.Helper()
	full := s[:len(s)+2]
	if full[len(s)] != guard || full[len(s)+1] != guard {
		t.Fatalf("%s: wrote past the end of dst", what)
	}
}

// checkRows runs every implementation on d and compares each output with
// its float64 sum.
func checkRows(t *testing.T, r *rand.Rand, impls []rowsImpl, d *rowsData) {
	t.Helper()
	n, R, st := d.n, d.R, d.stride
	dst0 := randFloats(r, n, 1)
	for _, elem := range []string{"f32", "f16", "u8"} {
		xs := map[string][]float32{"f32": d.x, "f16": d.xh, "u8": d.xu}[elem]
		// AxpyRows: want[j] = dst0[j] + Σ_r alpha[r]*x[r*st+j].
		want, mag := make([]float64, n), make([]float64, n)
		for j := range n {
			want[j], mag[j] = float64(dst0[j]), math.Abs(float64(dst0[j]))
			for row := range R {
				p := float64(d.v[row]) * float64(xs[row*st+j])
				want[j] += p
				mag[j] += math.Abs(p)
			}
		}
		for _, im := range impls {
			what := fmt.Sprintf("%s: axpyRows (%s) n=%d R=%d stride=%d", im.name, elem, n, R, st)
			dst := guarded(r, dst0, n)
			switch elem {
			case "f16":
				im.axpyRowsF16(dst, d.v, d.h, st)
			case "u8":
				im.axpyRowsU8(dst, d.v, d.u, st)
			default:
				im.axpyRows(dst, d.v, d.x, st)
			}
			checkGuards(t, what, dst)
			for j := range n {
				if e := math.Abs(float64(dst[j]) - want[j]); !(e <= rowsTolerance*mag[j]) {
					t.Fatalf("%s: dst[%d] = %g, want %g (Σ|terms| %g)", what, j, dst[j], want[j], mag[j])
				}
			}
		}
		// DotRows: want[r] = Σ_j w[j]*y[r*st+j].
		want, mag = make([]float64, R), make([]float64, R)
		for row := range R {
			for j := range n {
				p := float64(d.w[j]) * float64(xs[row*st+j])
				want[row] += p
				mag[row] += math.Abs(p)
			}
		}
		for _, im := range impls {
			what := fmt.Sprintf("%s: dotRows (%s) n=%d R=%d stride=%d", im.name, elem, n, R, st)
			dst := guarded(r, randFloats(r, R, 1), R) // stale values must be overwritten
			switch elem {
			case "f16":
				im.dotRowsF16(dst, d.w, d.h, st)
			case "u8":
				im.dotRowsU8(dst, d.w, d.u, st)
			default:
				im.dotRows(dst, d.w, d.x, st)
			}
			checkGuards(t, what, dst)
			for row := range R {
				if e := math.Abs(float64(dst[row]) - want[row]); !(e <= rowsTolerance*mag[row]) {
					t.Fatalf("%s: dst[%d] = %g, want %g (Σ|terms| %g)", what, row, dst[row], want[row], mag[row])
				}
			}
		}
	}
	// DotRowsF16W: want[r] = Σ_j f16(wh[j])*x[r*st+j], the float32 rows.
	want, mag := make([]float64, R), make([]float64, R)
	for row := range R {
		for j := range n {
			p := float64(d.xw[j]) * float64(d.x[row*st+j])
			want[row] += p
			mag[row] += math.Abs(p)
		}
	}
	for _, im := range impls {
		what := fmt.Sprintf("%s: dotRowsF16W n=%d R=%d stride=%d", im.name, n, R, st)
		dst := guarded(r, randFloats(r, R, 1), R)
		im.dotRowsF16W(dst, d.wh, d.x, st)
		checkGuards(t, what, dst)
		for row := range R {
			if e := math.Abs(float64(dst[row]) - want[row]); !(e <= rowsTolerance*mag[row]) {
				t.Fatalf("%s: dst[%d] = %g, want %g (Σ|terms| %g)", what, row, dst[row], want[row], mag[row])
			}
		}
	}
}

// TestRowsOverlays runs the generic, exported and overlay row kernels on
// every n in 0..300 and R in 0..20, with gaps of NaN between rows.
func TestRowsOverlays(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	impls := rowsImpls(t)
	for n := 0; n <= 300; n++ {
		for R := 0; R <= 20; R++ {
			checkRows(t, r, impls, newRowsData(r, n, R, n+r.IntN(9)))
		}
	}
}

// TestRowsShapes covers attention-sized cases and the stride edge
// cases: rows back to back, overlapping rows, one row repeated.
func TestRowsShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	impls := rowsImpls(t)
	for _, c := range [][3]int{
		{2048, 128, 2048 + 5}, {2048, 128, 4096}, {512, 64, 512}, {1000, 37, 1003},
		{77, 9, 30}, {64, 5, 1}, {129, 6, 0}, {16, 1, 0}, {1, 300, 1}, {15, 300, 15},
	} {
		checkRows(t, r, impls, newRowsData(r, c[0], c[1], c[2]))
	}
}

// TestRowsBounds checks that a strided operand one element short, or a
// negative stride, panics in Go before any output is written.
func TestRowsBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, im := range rowsImpls(t) {
		if im.name == "generic" {
			continue // the generic loops index the slices themselves
		}
		for _, c := range [][3]int{{17, 5, 20}, {8, 3, 8}, {40, 1, 40}, {3, 2, -3}} {
			n, R, st := c[0], c[1], c[2]
			span := n
			if st > 0 {
				span = (R-1)*st + n
			}
			x := randFloats(r, span, 1)[:span-1]
			h := make([]uint16, span)[:span-1]
			u := make([]uint8, span)[:span-1]
			v, w := randFloats(r, R, 1), randFloats(r, n, 1)
			wh := make([]uint16, n)
			for j := range wh {
				wh[j] = tensor.F32ToF16(w[j])
			}
			calls := map[string]func(dst []float32){
				"axpyRows":    func(dst []float32) { im.axpyRows(dst[:n], v, x, st) },
				"axpyRowsF16": func(dst []float32) { im.axpyRowsF16(dst[:n], v, h, st) },
				"axpyRowsU8":  func(dst []float32) { im.axpyRowsU8(dst[:n], v, u, st) },
				"dotRows":     func(dst []float32) { im.dotRows(dst[:R], w, x, st) },
				"dotRowsF16":  func(dst []float32) { im.dotRowsF16(dst[:R], w, h, st) },
				"dotRowsU8":   func(dst []float32) { im.dotRowsU8(dst[:R], w, u, st) },
				"dotRowsF16W": func(dst []float32) { im.dotRowsF16W(dst[:R], wh, x, st) },
			}
			for name, call := range calls {
				dst := make([]float32, max(n, R))
				for i := range dst {
					dst[i] = guard
				}
				if !panics(func() { call(dst) }) {
					t.Fatalf("%s: %s n=%d R=%d stride=%d on a short operand: no panic", im.name, name, n, R, st)
				}
				for i, v := range dst {
					if v != guard {
						t.Fatalf("%s: %s n=%d R=%d stride=%d: dst[%d] written before the panic", im.name, name, n, R, st, i)
					}
				}
			}
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}
