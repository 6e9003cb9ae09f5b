package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/plan"
)

// recState is a session's recurrent state: one slot per plan state slot,
// carried across passes (token_shift's previous row, wkv7's [H, E, E]
// matrices), and the wkv7 scratch.
type recState struct {
	slots [][]float32
	tmp   []float32
}

func newRecState(sizes []int, tmp int) recState {
	r := recState{tmp: make([]float32, tmp)}
	for _, n := range sizes {
		r.slots = append(r.slots, make([]float32, n))
	}
	return r
}

// reset zeroes every slot: the state at position 0.
func (r *recState) reset() {
	for _, s := range r.slots {
		clear(s)
	}
}

// isRecurrent reports whether op is one of the ops run by recState.run.
func isRecurrent(op plan.Op) bool {
	switch op {
	case plan.OpLayerNorm, plan.OpTokenShift, plan.OpMix, plan.OpSub, plan.OpSigmoid,
		plan.OpTanh, plan.OpReLU, plan.OpWKV7:
		return true
	}
	return false
}

// run executes one of the ops isRecurrent accepts over the valid rows
// of its buffers: out and in are [rows, cols] (padding rows excluded, so
// they never reach the state).
func (r *recState) run(st *step, out []float32, in [][]float32, rows, cols int) {
	x := in[0]
	switch st.Op {
	case plan.OpLayerNorm:
		layerNorm(out, x, st.ws[0], st.ws[1], cols, st.Eps)
	case plan.OpTokenShift:
		tokenShift(out, x, r.slots[st.Slot], rows, cols)
	case plan.OpMix:
		y, m := in[1], st.ws[0]
		for t := 0; t < rows; t++ {
			o := t * cols
			for c := 0; c < cols; c++ {
				out[o+c] = x[o+c] + (y[o+c]-x[o+c])*m[c]
			}
		}
	case plan.OpSub:
		y := in[1]
		for j := range out {
			out[j] = x[j] - y[j]
		}
	case plan.OpSigmoid:
		for j := range out {
			out[j] = float32(1 / (1 + math.Exp(-float64(x[j]))))
		}
	case plan.OpTanh:
		for j := range out {
			out[j] = float32(math.Tanh(float64(x[j])))
		}
	case plan.OpReLU:
		for j := range out {
			out[j] = max(x[j], 0)
		}
	case plan.OpWKV7:
		wkv7(out, in, r.slots[st.Slot], st.ws, rows, cols, st.HeadDim, st.Eps, r.tmp)
	}
}

// layerNorm is out[t][c] = (x[t][c] - mean) / sqrt(var + eps) * w[c] + b[c]
// over each row of x [T, C] (biased variance, sums in float64).
func layerNorm(out, x, w, b []float32, C int, eps float32) {
	for t := 0; t*C < len(x); t++ {
		row := x[t*C : (t+1)*C]
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		mean := s / float64(C)
		var ss float64
		for _, v := range row {
			d := float64(v) - mean
			ss += d * d
		}
		inv := 1 / math.Sqrt(ss/float64(C)+float64(eps))
		for c, v := range row {
			out[t*C+c] = float32((float64(v)-mean)*inv)*w[c] + b[c]
		}
	}
}

// tokenShift is out[0] = S, out[t] = x[t-1], then S = x[T-1]; x, out
// [T, C], S [C].
func tokenShift(out, x, S []float32, T, C int) {
	copy(out[:C], S)
	copy(out[C:T*C], x[:(T-1)*C])
	copy(S, x[(T-1)*C:T*C])
}

// wkv7 is RWKV-7's time mix over T rows in order. in holds r, w, k, v, a
// [T, C]; ws holds k_k, k_a, r_k, gn_w, gn_b [C]; S is [H][E][E] (value
// index i, key index j). Per row and head, over the head's E channels:
//
//	decay_j = exp(-exp(-softplus(-w_j) - 0.5))
//	kk      = normalize(k * k_k)          (L2, divided by max(|.|, 1e-12))
//	k'_j    = k_j * (1 + (a_j - 1) * k_a_j)
//	sa_i    = sum_j -kk_j * S_ij
//	S_ij    = S_ij * decay_j + sa_i * kk_j * a_j + v_i * k'_j
//	y_i     = sum_j S_ij * r_j
//	out_i   = (y_i - mean(y)) / sqrt(var(y) + eps) * gn_w_i + gn_b_i + (sum_j r_j k'_j r_k_j) * v_i
//
// tmp holds at least 4*E floats.
func wkv7(out []float32, in [][]float32, S []float32, ws [][]float32, T, C, E int, eps float32, tmp []float32) {
	r, w, k, v, a := in[0], in[1], in[2], in[3], in[4]
	kk, kp, dec, y := tmp[:E], tmp[E:2*E], tmp[2*E:3*E], tmp[3*E:4*E]
	kkw, kaw, rkw, gnw, gnb := ws[0], ws[1], ws[2], ws[3], ws[4]
	for t := 0; t < T; t++ {
		for h := 0; h*E < C; h++ {
			o, c0 := t*C+h*E, h*E
			var nn float64
			for j := 0; j < E; j++ {
				kj := k[o+j]
				kk[j] = kj * kkw[c0+j]
				nn += float64(kk[j]) * float64(kk[j])
				kp[j] = kj * (1 + (a[o+j]-1)*kaw[c0+j])
				z := -float64(w[o+j])
				sp := z
				if z <= 20 {
					sp = math.Log1p(math.Exp(z))
				}
				dec[j] = float32(math.Exp(-math.Exp(-sp - 0.5)))
			}
			inv := float32(1 / math.Max(math.Sqrt(nn), 1e-12))
			for j := range kk {
				kk[j] *= inv
			}
			Sh := S[h*E*E : (h+1)*E*E]
			for i := 0; i < E; i++ {
				row := Sh[i*E : (i+1)*E]
				var sa float32
				for j, s := range row {
					sa -= kk[j] * s
				}
				vi := v[o+i]
				var yi float32
				for j := range row {
					s := row[j]*dec[j] + sa*(kk[j]*a[o+j]) + vi*kp[j]
					row[j] = s
					yi += s * r[o+j]
				}
				y[i] = yi
			}
			var bonus float32
			for j := 0; j < E; j++ {
				bonus += r[o+j] * kp[j] * rkw[c0+j]
			}
			var sum float64
			for _, yi := range y {
				sum += float64(yi)
			}
			mean := sum / float64(E)
			var ss float64
			for _, yi := range y {
				d := float64(yi) - mean
				ss += d * d
			}
			gi := 1 / math.Sqrt(ss/float64(E)+float64(eps))
			for i, yi := range y {
				out[o+i] = float32((float64(yi)-mean)*gi)*gnw[c0+i] + gnb[c0+i] + bonus*v[o+i]
			}
		}
	}
}
