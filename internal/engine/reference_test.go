package engine

// attention is the reference of the session's attention: it writes the T
// rows of k and v into the row-major cache at pos.., then for row t and
// head h: out[t][h] = sum_j softmax_j(s_j) V[j][g], g = h/(H/G),
// s_j = scale*q[t][h]·K[j][g] for j <= pos+t (within the window). The
// cache is float32, binary16 or uint8 (see kvcache.go); values are encoded
// on write and decoded where they are read, so the result equals attention
// over a float32 cache holding the decoded values.
func attention(a *attnArgs) {
	switch {
	case a.Ku != nil:
		attend(a, a.Ku, a.Vu, u8Codec{a.ks}, u8Codec{a.vs})
	case a.Kh != nil:
		attend(a, a.Kh, a.Vh, f16Codec{}, f16Codec{})
	default:
		attend(a, a.K, a.V, f32Codec{}, f32Codec{})
	}
}

// attend is attention over a row-major cache of element type T.
func attend[T any, C kvCodec[T]](a *attnArgs, K, V []T, kc, vc C) {
	storeKV(a, K, V, kc, vc)
	attendRows(a, K, V, kc, vc, 0, a.T*a.H, make([]float32, a.pos+a.T))
}
