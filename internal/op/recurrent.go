package op

import "math"

// LayerNormRows sets out[t][c] = (x[t][c] - mean) / sqrt(var + eps) * w[c] + b[c]
// over each row of x [T, C] (biased variance, sums in float64).
func LayerNormRows(out, x, w, b []float32, C int, eps float32) {
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

// TokenShiftRows sets out[0] = S, out[t] = x[t-1], then S = x[T-1]; x and
// out are [T, C], S is [C]. Nothing happens for T = 0.
func TokenShiftRows(out, x, S []float32, T, C int) {
	if T == 0 {
		return
	}
	copy(out[:C], S)
	copy(out[C:T*C], x[:(T-1)*C])
	copy(S, x[(T-1)*C:T*C])
}

// SigmoidOf is 1 / (1 + exp(-v)), in float64.
func SigmoidOf(v float32) float32 { return float32(1 / (1 + math.Exp(-float64(v)))) }

// Softplus is log(1 + exp(x)), and x itself above 20 (as PyTorch's).
func Softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// WKV7Rows runs RWKV-7's time mix over T rows in order. r, w, k, v, a are
// [T, C]; ws holds k_k, k_a, r_k, gn_w, gn_b [C]; Sin is the [H][E][E]
// state before the rows (value index i, key index j), zero at the start
// of a sequence, and Sout the state after them (which may be Sin). Per row
// and head, over the head's E channels:
//
//	decay_j = exp(-exp(-Softplus(-w_j) - 0.5))
//	kk      = normalize(k * k_k)          (L2, divided by max(|.|, 1e-12))
//	k'_j    = k_j * (1 + (a_j - 1) * k_a_j)
//	sa_i    = sum_j -kk_j * S_ij
//	S_ij    = S_ij * decay_j + sa_i * kk_j * a_j + v_i * k'_j
//	y_i     = sum_j S_ij * r_j
//	out_i   = (y_i - mean(y)) / sqrt(var(y) + eps) * gn_w_i + gn_b_i + (sum_j r_j k'_j r_k_j) * v_i
//
// tmp holds at least 4*E floats.
func WKV7Rows(out, r, w, k, v, a, Sin, Sout []float32, ws [5][]float32, T, C, E int, eps float32, tmp []float32) {
	if T == 0 {
		copy(Sout, Sin)
	}
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
				dec[j] = float32(math.Exp(-math.Exp(-Softplus(-float64(w[o+j])) - 0.5)))
			}
			inv := float32(1 / math.Max(math.Sqrt(nn), 1e-12))
			for j := range kk {
				kk[j] *= inv
			}
			Sh, Dh := Sin[h*E*E:(h+1)*E*E], Sout[h*E*E:(h+1)*E*E]
			for i := 0; i < E; i++ {
				row, dst := Sh[i*E:(i+1)*E], Dh[i*E:(i+1)*E]
				var sa float32
				for j, s := range row {
					sa -= kk[j] * s
				}
				vi := v[o+i]
				var yi float32
				for j := range row {
					s := row[j]*dec[j] + sa*(kk[j]*a[o+j]) + vi*kp[j]
					dst[j] = s
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
		Sin = Sout // the next rows continue from the state written
	}
}

// HadamardRows sets each P-wide block of each row of out to the block of
// x times H_P / sqrt(P) (H_P the Sylvester Hadamard matrix, H[i][j] =
// (-1)^popcount(i&j)): the reference of the hadamard op, a plain butterfly
// in float32. P must be a power of two dividing len(x); out and x have
// the same length and may be the same slice.
func HadamardRows(out, x []float32, P int) {
	copy(out, x)
	s := float32(1 / math.Sqrt(float64(P)))
	for b := 0; b+P <= len(out); b += P {
		v := out[b : b+P]
		for h := 1; h < P; h <<= 1 {
			for i := 0; i < P; i += 2 * h {
				for j := i; j < i+h; j++ {
					u, w := v[j], v[j+h]
					v[j], v[j+h] = u+w, u-w
				}
			}
		}
		for i := range v {
			v[i] *= s
		}
	}
}

// HadamardBlock is the block P of the hadamard op on rows of n values:
// the largest power of two dividing n.
func HadamardBlock(n int) int { return n & -n }
