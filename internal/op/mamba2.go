package op

import "math"

// SSMScanRows runs Mamba2's selective state-space scan over T rows in
// order. x is [T, H*P] (H heads of P channels), dt [T, H] (before the
// softplus), b and c [T, G*N] (G groups of N state dims; head h reads
// group h / (H/G)); A, D and dtBias are [H], A already negative (-exp of
// the checkpoint's A_log). S is the [H][P][N] state, zero at the start of
// a sequence. Per row and head:
//
//	dt'    = Softplus(dt_h + dtBias_h)
//	S_pn   = exp(dt' A_h) S_pn + dt' b_n x_p
//	out_p  = sum_n S_pn c_n + D_h x_p
func SSMScanRows(out, x, dt, b, c, A, D, dtBias, S []float32, T, H, P, G, N int) {
	HP, GN := H*P, G*N
	per := H / G // heads per group
	for t := 0; t < T; t++ {
		for h := 0; h < H; h++ {
			d := float32(Softplus(float64(dt[t*H+h] + dtBias[h])))
			dA := float32(math.Exp(float64(d * A[h])))
			g := h / per
			bt, ct := b[t*GN+g*N:t*GN+(g+1)*N], c[t*GN+g*N:t*GN+(g+1)*N]
			for p := 0; p < P; p++ {
				xp := x[t*HP+h*P+p]
				dx := d * xp
				s := S[(h*P+p)*N : (h*P+p+1)*N]
				var y float32
				for n := range s {
					v := s[n]*dA + dx*bt[n]
					s[n] = v
					y += v * ct[n]
				}
				out[t*HP+h*P+p] = y + D[h]*xp
			}
		}
	}
}
