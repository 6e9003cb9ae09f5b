package quant

import (
	"math"
	"testing"
)

// groupMeanAbs returns mean |w - w'| of each group: HQQ's own objective as
// MNN measures it.
func groupMeanAbs(w, deq []float32, rows, cols, g int) []float64 {
	ng := (cols + g - 1) / g
	out := make([]float64, rows*ng)
	for i := range w {
		gi := i/cols*ng + i%cols/g
		out[gi] += math.Abs(float64(w[i]) - float64(deq[i]))
	}
	for gi := range out {
		n := min(g, cols-gi%ng*g)
		out[gi] /= float64(n)
	}
	return out
}

// TestHQQNotWorse: on N(0,1) weights and on N(0, 0.02^2) weights with 1% of
// outliers at 20x, HQQ's mean |w - w'| is never above plain min/max (amax/7
// when symmetric) in any group, since plain is the first point HQQ evaluates
// and it keeps the best. The tensor-wide L1 and MSE of both are measured:
// HQQ optimizes an l0.7 error, so L1 drops. MSE is not what HQQ optimizes and
// not guaranteed; on this data it dropped in every case measured (by 1% to
// 9%, see the log), and the test asserts that it does not rise.
func TestHQQNotWorse(t *testing.T) {
	for name, w := range q4Data() {
		for _, sym := range []bool{true, false} {
			for _, g := range []int{32, 64, 128} {
				plain, err := QuantizeQ4(w, 64, 256, Q4Options{Group: g, Sym: sym})
				if err != nil {
					t.Fatal(err)
				}
				hqq, err := QuantizeQ4(w, 64, 256, Q4Options{Group: g, Sym: sym, HQQ: true})
				if err != nil {
					t.Fatal(err)
				}
				gp := groupMeanAbs(w, plain.Dequantize(), 64, 256, g)
				gh := groupMeanAbs(w, hqq.Dequantize(), 64, 256, g)
				better := 0
				for i := range gp {
					if gh[i] > gp[i]*(1+1e-5)+1e-12 {
						t.Fatalf("%s sym=%v g%d: group %d: HQQ mean|err| %g > plain %g", name, sym, g, i, gh[i], gp[i])
					}
					if gh[i] < gp[i] {
						better++
					}
				}
				for _, v := range hqq.Q {
					if (sym && (v < -8 || v > 7)) || (!sym && (v < 0 || v > 15)) {
						t.Fatalf("%s sym=%v: q = %d out of range", name, sym, v)
					}
				}
				sp, _ := plain.Error(w)
				sh, _ := hqq.Error(w)
				t.Logf("%s sym=%v g%d: groups improved %d/%d; L1 %.4g -> %.4g (%.1f%%), RMSE %.4g -> %.4g (%.1f%%)",
					name, sym, g, better, len(gp), sp.MeanAbs, sh.MeanAbs, 100*(sh.MeanAbs/sp.MeanAbs-1),
					sp.RMSE, sh.RMSE, 100*(sh.RMSE/sp.RMSE-1))
				if sh.MeanAbs >= sp.MeanAbs {
					t.Errorf("%s sym=%v g%d: HQQ did not lower the tensor L1 error", name, sym, g)
				}
				if sh.RMSE > sp.RMSE {
					t.Errorf("%s sym=%v g%d: HQQ raised the RMSE %g -> %g", name, sym, g, sp.RMSE, sh.RMSE)
				}
			}
		}
	}
}

// TestShrinkLp: the shrinkage operator is odd, zero on small inputs
// (|x| <= beta^(-1/(2-p))), and moves large ones toward zero by
// |x|^(p-1)/beta.
func TestShrinkLp(t *testing.T) {
	thr := math.Pow(HQQBeta, -1/(2-HQQNorm))
	for _, x := range []float64{0, 1e-9, thr * 0.999, -thr * 0.5} {
		if v := shrinkLp(x); v != 0 {
			t.Errorf("shrink(%g) = %g, want 0", x, v)
		}
	}
	for _, x := range []float64{thr * 1.01, 0.5, 2, 100} {
		want := x - math.Pow(x, HQQNorm-1)/HQQBeta
		if v := shrinkLp(x); math.Abs(v-want) > 1e-12*x || shrinkLp(-x) != -v {
			t.Errorf("shrink(%g) = %g, want %g (and odd)", x, v, want)
		}
	}
}
