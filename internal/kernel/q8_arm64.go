//go:build !purego

package kernel

// quantizeQ8NEON is quantizeQ8Generic over nb whole blocks (nb >= 0).
//
//go:noescape
func quantizeQ8NEON(q *int8, d *float32, sum *int32, x *float32, nb int)

func quantizeQ8Arm64(q []int8, d []float32, sum []int32, x []float32) {
	nb := len(d)
	if nb == 0 {
		return
	}
	if len(q) < nb*QK || len(sum) < nb || len(x) < nb*QK {
		quantizeQ8Generic(q, d, sum, x)
		return
	}
	quantizeQ8NEON(&q[0], &d[0], &sum[0], &x[0], nb)
}
