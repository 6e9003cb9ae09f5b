package quant

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// stories260K.bin is a llama2.c legacy checkpoint: a header of 7 int32
// (dim 64, hidden 172, layers 5, heads 8, kv heads 4, vocab -512, seq 512),
// then float32 tensors in a fixed order. These offsets (in float32 values
// after the header) follow that order: embeddings [512,64], attention norms
// [5,64], wq [5,64,64], wk [5,32,64], wv [5,32,64], wo [5,64,64], ffn norms
// [5,64], w1 [5,172,64], w2 [5,64,172], w3 [5,172,64].
const (
	s260Header = 28
	s260WQ     = 512*64 + 5*64
	s260W1     = s260WQ + 5*64*64 + 2*5*32*64 + 5*64*64 + 5*64
	s260W2     = s260W1 + 5*172*64
)

// stories260K returns n float32 values at value offset off of the checkpoint.
func stories260K(t testing.TB, off, n int) []float32 {
	data := testutil.ReadFile(t, "llama2c/stories260K.bin")
	if len(data) != 1187612 || binary.LittleEndian.Uint32(data) != 64 {
		t.Fatalf("stories260K.bin: unexpected size %d or dim", len(data))
	}
	w := make([]float32, n)
	for i := range w {
		w[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[s260Header+4*(off+i):]))
	}
	return w
}

// TestRealWeights quantizes the real stories260K linears (wq of all layers as
// [320, 64]; w2 of all layers as [320, 172], a K no block divides) and checks
// on them what the random tests check: LPBQ refined never worse than
// reference per row, HQQ never worse than min/max per group, W8 within s/2.
func TestRealWeights(t *testing.T) {
	for _, m := range []struct {
		name       string
		w          []float32
		rows, cols int
	}{
		{"wq", stories260K(t, s260WQ, 5*64*64), 320, 64},
		{"w2", stories260K(t, s260W2, 5*64*172), 320, 172},
	} {
		st0, _ := Compare(m.w, make([]float32, len(m.w)))
		if st0.RMSE < 1e-3 || st0.RMSE > 10 {
			t.Fatalf("%s: rms %g does not look like trained weights (bad offset?)", m.name, st0.RMSE)
		}
		for _, blk := range []int{16, 32, 64} {
			ref, err := QuantizeLPBQ(m.w, m.rows, m.cols, blk, LPBQReference)
			if err != nil {
				t.Fatal(err)
			}
			fin, _ := QuantizeLPBQ(m.w, m.rows, m.cols, blk, LPBQRefined)
			if fin.Padded != (m.cols%blk != 0) {
				t.Errorf("%s b%d: Padded = %v", m.name, blk, fin.Padded)
			}
			dr, df := ref.Dequantize(), fin.Dequantize()
			for r := range m.rows {
				var er, ef float64
				for c := range m.cols {
					i := r*m.cols + c
					a, b := float64(m.w[i]-dr[i]), float64(m.w[i]-df[i])
					er, ef = er+a*a, ef+b*b
				}
				if ef > er*(1+relTol) {
					t.Fatalf("%s b%d row %d: refined SSE %g > reference %g", m.name, blk, r, ef, er)
				}
			}
			sr, _ := Compare(m.w, dr)
			sf, _ := Compare(m.w, df)
			t.Logf("%s lpbq b%d: reference rel %.4f, refined rel %.4f", m.name, blk, sr.Relative, sf.Relative)
		}
		for _, sym := range []bool{true, false} {
			plain, _ := QuantizeQ4(m.w, m.rows, m.cols, Q4Options{Group: 32, Sym: sym})
			hqq, err := QuantizeQ4(m.w, m.rows, m.cols, Q4Options{Group: 32, Sym: sym, HQQ: true})
			if err != nil {
				t.Fatal(err)
			}
			gp := groupMeanAbs(m.w, plain.Dequantize(), m.rows, m.cols, 32)
			gh := groupMeanAbs(m.w, hqq.Dequantize(), m.rows, m.cols, 32)
			for i := range gp {
				if gh[i] > gp[i]*(1+1e-5)+1e-12 {
					t.Fatalf("%s sym=%v group %d: HQQ %g > plain %g", m.name, sym, i, gh[i], gp[i])
				}
			}
			sp, _ := plain.Error(m.w)
			sh, _ := hqq.Error(m.w)
			t.Logf("%s q4 g32 sym=%v: plain L1 %.4g RMSE %.4g, hqq L1 %.4g RMSE %.4g", m.name, sym, sp.MeanAbs, sp.RMSE, sh.MeanAbs, sh.RMSE)
		}
		w8, _ := QuantizeW8(m.w, m.rows, m.cols)
		deq := w8.Dequantize()
		for i := range m.w {
			s := float64(w8.Scales[i/m.cols])
			if e := math.Abs(float64(m.w[i] - deq[i])); !within(e, s/2, 127*s) {
				t.Fatalf("%s w8: w[%d] error %g > s/2", m.name, i, e)
			}
		}
	}
}
