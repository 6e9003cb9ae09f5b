package op

// ShortConvRows runs a depthwise causal convolution over time (LFM2's
// short convolution) on T rows of x [T, C]: each channel c has its own
// kernel w[c] of L taps ([C, L] row-major), and
//
//	out[t][c] = sum_j w[c][j] * x[t-(L-1)+j][c]
//
// where rows before the first of this call come from S, the [L-1, C] rows
// the previous call ended with (oldest first; zero at the start of a
// sequence). S then holds the last L-1 rows of its old rows followed by
// x. Nothing happens for T = 0. out and x must not overlap.
func ShortConvRows(out, x, w, S []float32, T, C, L int) {
	if T == 0 {
		return
	}
	H := L - 1                     // history rows
	row := func(i int) []float32 { // row i of the history followed by x, i in [0, H+T)
		if i < H {
			return S[i*C : (i+1)*C]
		}
		return x[(i-H)*C : (i-H+1)*C]
	}
	for t := 0; t < T; t++ {
		o := out[t*C : (t+1)*C]
		clear(o)
		for j := 0; j < L; j++ {
			r := row(t + j)
			for c := range o {
				o[c] += w[c*L+j] * r[c]
			}
		}
	}
	ShortConvState(S, x, T, C, L)
}

// ShortConvState advances a short convolution's state S [L-1, C] past T
// rows of x [T, C]: S becomes the last L-1 rows of S followed by x.
func ShortConvState(S, x []float32, T, C, L int) {
	H := L - 1
	if T >= H {
		copy(S, x[(T-H)*C:T*C])
		return
	}
	copy(S, S[T*C:H*C])
	copy(S[(H-T)*C:], x[:T*C])
}
