package kernel

// SumWords returns the wrapping sum of w's words. It is a plain read of
// memory, as fast as this CPU reads (vector loads where the build has
// them): the decode floor's probe (package bench) times it. With ahead it
// also asks for the words ahead of its loads as the prefetching row loops
// do, which on some CPUs reads faster (docs/lab/kernels-notes.md, "Asking for the
// weights ahead" and "Two requests a line"); where the build has no
// prefetch instruction, ahead changes nothing.
func SumWords(w []uint64, ahead bool) uint64 {
	var s uint64
	if n := len(w) / 32 * 32; n > 0 {
		s = sumWordsImpl(w[:n], ahead)
		w = w[n:]
	}
	return s + sumWordsGeneric(w)
}

// sumWordsGeneric is the reference of SumWords.
func sumWordsGeneric(w []uint64) uint64 {
	var a0, a1, a2, a3 uint64
	for len(w) >= 4 {
		a0 += w[0]
		a1 += w[1]
		a2 += w[2]
		a3 += w[3]
		w = w[4:]
	}
	for _, x := range w {
		a0 += x
	}
	return a0 + a1 + a2 + a3
}
