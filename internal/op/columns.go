package op

// ColumnsRows runs the columns op over T rows of x with C columns: out[t]
// = x[t][lo:hi], or with group > 0 that range of each group-wide block of
// x[t] in turn.
func ColumnsRows(out, x []float32, T, C, lo, hi, group int) {
	if group <= 0 {
		group = C
	}
	w, o := hi-lo, 0
	for t := 0; t < T; t++ {
		for b := t * C; b < (t+1)*C; b += group {
			copy(out[o:o+w], x[b+lo:b+hi])
			o += w
		}
	}
}
