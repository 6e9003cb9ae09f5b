package op

// CausalConvRows runs the depthwise causal convolution of x [T, C] with w
// [C, K] into out [T, C] (LFM2's short convolution): each channel c has
// its own kernel w[c] of K taps, and
//
//	out[t][c] = sum_j w[c][j] * x[t-K+1+j][c]
//
// where the K-1 rows before x come from Sin [(K-1)*C] (oldest first; zero
// at the start of a sequence). The last K-1 rows of Sin and x are written
// to Sout, which may be Sin. out and x must not overlap.
func CausalConvRows(out, x, w, Sin, Sout []float32, T, C, K int) {
	H := K - 1                     // state rows
	row := func(i int) []float32 { // row i of Sin followed by x, i in [0, H+T)
		if i < H {
			return Sin[i*C : (i+1)*C]
		}
		return x[(i-H)*C : (i-H+1)*C]
	}
	for t := 0; t < T; t++ {
		o := out[t*C : (t+1)*C]
		clear(o)
		for j := 0; j < K; j++ {
			r := row(t + j)
			for c := range o {
				o[c] += w[c*K+j] * r[c]
			}
		}
	}
	if T >= H {
		copy(Sout, x[(T-H)*C:T*C])
		return
	}
	copy(Sout, Sin[T*C:H*C]) // copy moves overlapping ranges correctly
	copy(Sout[(H-T)*C:], x[:T*C])
}
