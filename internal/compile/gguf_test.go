package compile

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// randomBlocks returns n random blocks of typ: random bytes, with each
// block's f16 scale fields (the first halfs halves) set to normal values
// of magnitude about mag, and a few Q4_K groups with a zero 6-bit scale
// and a nonzero minimum (the constant groups setAffine handles).
func randomBlocks(r *rand.Rand, typ gguf.GGMLType, n, halfs int, mag float64) []byte {
	bb := int(typ.BlockBytes())
	raw := make([]byte, n*bb)
	for i := range raw {
		raw[i] = byte(r.IntN(256))
	}
	for b := range n {
		blk := raw[b*bb:]
		for h := range halfs {
			v := float32((r.Float64()*2 - 1) * mag)
			if h == 0 {
				v = float32((0.5 + r.Float64()) * mag) // d > 0
			}
			binary.LittleEndian.PutUint16(blk[2*h:], tensor.F32ToF16(v))
		}
		if typ == gguf.TypeQ4_K && b%3 == 0 {
			blk[4] &^= 63 // group 0: scale 0, minimum kept
			blk[8] |= 1
		}
	}
	return raw
}

// TestFromBlocksQ4Exact: Q4_0, Q4_1 and Q4_K blocks re-laid as q4 groups
// of 32 dequantize to the values ggml's decoder gives, up to the float32
// rounding of the zero point: |diff| <= 1e-6 * (|min| + 16|scale|) per
// value, bounded here by 1e-6 times the block's largest magnitude plus
// its minimum's.
func TestFromBlocksQ4Exact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 6, 512
	for _, tc := range []struct {
		typ   gguf.GGMLType
		halfs int
	}{{gguf.TypeQ4_0, 1}, {gguf.TypeQ4_1, 2}, {gguf.TypeQ4_K, 2}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			n := rows * cols / int(tc.typ.BlockSize())
			raw := randomBlocks(r, tc.typ, n, tc.halfs, 0.01)
			want := make([]float32, rows*cols)
			gguf.Dequantize(tc.typ, want, raw)
			q, err := fromBlocks(tc.typ, raw, rows, cols, false)
			if err != nil {
				t.Fatal(err)
			}
			if q.Scheme.Block != 32 || q.Scheme.Sym != (tc.typ == gguf.TypeQ4_0) {
				t.Fatalf("scheme %v", q.Scheme)
			}
			got := q.Dequantize()
			var amax float64
			for _, v := range want {
				amax = max(amax, math.Abs(float64(v)))
			}
			worst, nonzero := 0.0, 0
			for i := range want {
				worst = max(worst, math.Abs(float64(got[i]-want[i])))
				if want[i] != 0 {
					nonzero++
				}
			}
			if tol := 4e-6 * amax; worst > tol {
				t.Errorf("max |diff| %g > %g (largest value %g)", worst, tol, amax)
			}
			if nonzero < len(want)/2 {
				t.Errorf("only %d of %d values nonzero: the test data is degenerate", nonzero, len(want))
			}
			if (tc.typ == gguf.TypeQ4_0 || tc.typ == gguf.TypeQ4_K) && worst != 0 {
				t.Errorf("%v should be bit-exact, max |diff| %g", tc.typ, worst)
			}
			if tc.typ != gguf.TypeQ4_K {
				return
			}
			// Laid out as q4k-p, read by the kernel as the engine reads
			// it: every row bit for bit ggml's decoding.
			l := plan.WeightLayout{Kind: plan.LayoutQ4K, Block: 32, Packed: true}
			b, err := encodeQ4K(l, q, []int64{rows, cols})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := l.Parts(rows, cols)
			w := &kernel.Q4{N: rows, K: cols, Nib: b[:p.Scales], K4: b[p.Scales:p.Size]}
			if err := w.Check(); err != nil {
				t.Fatal(err)
			}
			row := make([]float32, cols)
			for n := range rows {
				w.Row(row, n)
				for k, v := range row {
					if want := want[n*cols+k]; math.Float32bits(v) != math.Float32bits(want) {
						t.Fatalf("q4k-p row %d input %d: %g, ggml %g", n, k, v, want)
					}
				}
			}
		})
	}
}

// TestFromBlocksW8: the other block types are decoded and requantized to
// int8 per row: each value within half a step (the row's scale) of
// ggml's decoding.
func TestFromBlocksW8(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 4, 256
	for _, tc := range []struct {
		typ   gguf.GGMLType
		halfs int
	}{{gguf.TypeQ8_0, 1}, {gguf.TypeQ5_0, 1}, {gguf.TypeQ6_K, 0}, {gguf.TypeQ5_K, 2}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			n := rows * cols / int(tc.typ.BlockSize())
			raw := randomBlocks(r, tc.typ, n, tc.halfs, 0.01)
			if tc.typ == gguf.TypeQ6_K { // d is the last 2 bytes of the 210
				for b := range n {
					binary.LittleEndian.PutUint16(raw[b*210+208:], tensor.F32ToF16(0.001))
				}
			}
			want := make([]float32, rows*cols)
			gguf.Dequantize(tc.typ, want, raw)
			q, err := fromBlocks(tc.typ, raw, rows, cols, false)
			if err != nil {
				t.Fatal(err)
			}
			if q.Scheme.Kind != "w8" {
				t.Fatalf("scheme %v, want w8", q.Scheme)
			}
			got := q.Dequantize()
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 0.5001*float64(q.Scales[i/cols]) {
					t.Fatalf("value %d: %g vs %g, more than half the row's step %g", i, got[i], want[i], q.Scales[i/cols])
				}
			}
		})
	}
}

// TestFromBlocksRefuses: a wrong byte count and a non-finite scale are
// errors, not artifacts.
func TestFromBlocksRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	raw := randomBlocks(r, gguf.TypeQ4_K, 2, 2, 0.01)
	if _, err := fromBlocks(gguf.TypeQ4_K, raw[:200], 1, 512, false); err == nil {
		t.Error("a short tensor was accepted")
	}
	binary.LittleEndian.PutUint16(raw, 0x7c00) // d = +Inf
	if _, err := fromBlocks(gguf.TypeQ4_K, raw, 1, 512, false); err == nil {
		t.Error("an infinite scale was accepted")
	}
}

// TestFromBlocksQ6KTable: Q6_K blocks of the embedding or classifier
// become q6k exactly (every value ggml's decoding, bit for bit), and the
// packed layout q6k-p stands for the same values; a non-finite d is an
// error.
func TestFromBlocksQ6KTable(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, cols = 3, 512
	n := rows * cols / 256
	raw := randomBlocks(r, gguf.TypeQ6_K, n, 0, 0.01)
	for b := range n {
		binary.LittleEndian.PutUint16(raw[b*210+208:], tensor.F32ToF16(0.001*float32(b+1)))
	}
	want := make([]float32, rows*cols)
	gguf.Dequantize(gguf.TypeQ6_K, want, raw)
	q, err := fromBlocks(gguf.TypeQ6_K, raw, rows, cols, true)
	if err != nil {
		t.Fatal(err)
	}
	if q.Scheme.Kind != quant.KindQ6K {
		t.Fatalf("scheme %v, want q6k", q.Scheme)
	}
	for i, v := range q.Dequantize() {
		if math.Float32bits(v) != math.Float32bits(want[i]) {
			t.Fatalf("value %d: %g, ggml %g", i, v, want[i])
		}
	}
	l := plan.WeightLayout{Kind: plan.LayoutQ6K, Packed: true}
	b, err := encodeQ6K(l, q, []int64{rows, cols})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := l.Parts(rows, cols)
	sub := make([]int8, p.Scales-p.Sub)
	for i := range sub {
		sub[i] = int8(b[p.Sub+int64(i)])
	}
	d := make([]float32, p.NScales)
	for i := range d {
		d[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[p.Scales+4*int64(i):]))
	}
	w := &kernel.Q6{N: rows, K: cols, Nib: b[:p.Codes], Hi: b[p.Codes:p.Sub], Sub: sub, D: d}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, cols)
	for nr := range rows {
		w.Row(row, nr)
		for k, v := range row {
			if math.Float32bits(v) != math.Float32bits(want[nr*cols+k]) {
				t.Fatalf("q6k-p row %d input %d: %g, ggml %g", nr, k, v, want[nr*cols+k])
			}
		}
	}
	binary.LittleEndian.PutUint16(raw[208:], 0x7c00) // d = +Inf
	if _, err := fromBlocks(gguf.TypeQ6_K, raw, rows, cols, true); err == nil {
		t.Error("an infinite scale was accepted")
	}
}
