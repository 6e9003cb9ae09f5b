package kernel

import (
	"errors"
	"fmt"
	"sync"
)

// The 6-bit weights: ggml's Q6_K super-blocks, laid out in planes.
const (
	// Q6Super is the number of inputs of a super-block: 16 groups of
	// Q6Group share one float32 scale d.
	Q6Super = 256
	// Q6Group is the number of inputs that share an int8 sub-scale.
	Q6Group = 16
)

// Q6 is a packed 6-bit weight W [N, K] (K a multiple of Q6Super) with an
// int8 sub-scale per group of 16 inputs and a float32 scale per
// super-block of 256:
//
//	w[n][k] = float32(D[s]*float32(Sub[g])) * float32(u - 32)
//
// for g = (n*K + k)/16, s = (n*K + k)/256 and the 6-bit code u (0..63)
// of input k. The codes lie in two planes (PackQ6): Nib holds their low
// 4 bits and Hi their high 2, both in the order the products unpack them.
type Q6 struct {
	N, K int
	Nib  []byte    // [N][K/2]: per super-block 128 bytes
	Hi   []byte    // [N][K/4]: per super-block 64 bytes
	Sub  []int8    // [N][K/16]
	D    []float32 // [N][K/256]
}

// Check reports whether w's parts have the sizes N and K imply.
func (w *Q6) Check() error {
	if w.N < 1 || w.K < Q6Super || w.K%Q6Super != 0 {
		return fmt.Errorf("kernel: q6 weight [%d, %d]: K must be a positive multiple of %d", w.N, w.K, Q6Super)
	}
	n := w.N * w.K
	if len(w.Nib) != n/2 || len(w.Hi) != n/4 || len(w.Sub) != n/Q6Group || len(w.D) != n/Q6Super {
		return fmt.Errorf("kernel: q6 weight [%d, %d]: %d, %d, %d and %d parts, want %d, %d, %d and %d",
			w.N, w.K, len(w.Nib), len(w.Hi), len(w.Sub), len(w.D), n/2, n/4, n/Q6Group, n/Q6Super)
	}
	return nil
}

// PackQ6 writes the 6-bit codes u [N][K] (each 0..63, K a multiple of
// Q6Super) as Q6.Nib and Q6.Hi. A super-block's 256 codes lie in 4
// chunks of 64 slots: slot b of chunk c holds the code of input
// q6Input(c, b) = 16*(b/4) + 4*c + b%4 of the super-block, so that the
// four bytes at a 32-bit lane g of every chunk are group g's 16 inputs
// (a product sums a group per lane with no shuffle). In super-block s
// of a row, nib byte j (0..63) holds chunk 0's slot j in its low 4 bits
// and chunk 1's in its high 4, nib byte 64+j chunks 2 and 3; hi byte j
// holds the high 2 bits of slot j of chunks 0, 1, 2 and 3 in its bits
// 0-1, 2-3, 4-5 and 6-7.
func PackQ6(nib, hi []byte, u []uint8, N, K int) error {
	if K%Q6Super != 0 || len(u) != N*K || len(nib) != N*K/2 || len(hi) != N*K/4 {
		return errors.New("kernel: pack q6: sizes do not fit")
	}
	for s := range N * K / Q6Super {
		v := u[s*Q6Super : (s+1)*Q6Super]
		nb, hb := nib[s*128:(s+1)*128], hi[s*64:(s+1)*64]
		for j := range 64 {
			a, b, c, d := v[q6Input(0, j)], v[q6Input(1, j)], v[q6Input(2, j)], v[q6Input(3, j)]
			if a > 63 || b > 63 || c > 63 || d > 63 {
				return fmt.Errorf("kernel: pack q6: super-block %d: code out of 0..63", s)
			}
			nb[j] = a&15 | (b&15)<<4
			nb[64+j] = c&15 | (d&15)<<4
			hb[j] = a>>4 | (b>>4)<<2 | (c>>4)<<4 | (d>>4)<<6
		}
	}
	return nil
}

// q6Input is the input (0..255 in its super-block) of slot b of chunk c.
func q6Input(c, b int) int { return 16*(b/4) + 4*c + b%4 }

// code returns the 6-bit code of input k of row n.
func (w *Q6) code(n, k int) int32 {
	i := n*w.K + k
	s, j := i/Q6Super, i%Q6Super
	g, c, l := j/16, j%16/4, j%4 // group, chunk, byte in the lane
	b := 4*g + l                 // slot
	nb := w.Nib[s*128+64*(c/2)+b]
	lo := nb & 15
	if c%2 == 1 {
		lo = nb >> 4
	}
	h := w.Hi[s*64+b] >> (2 * c) & 3
	return int32(lo | h<<4)
}

// Row writes the dequantized row n into dst [K].
func (w *Q6) Row(dst []float32, n int) {
	for k := range dst[:w.K] {
		i := n*w.K + k
		scale := float32(w.D[i/Q6Super] * float32(w.Sub[i/Q6Group])) // rounded as ggml rounds it
		dst[k] = scale * float32(w.code(n, k)-32)
	}
}

// MatMul computes rows [n0, n1) of the product for the T activation rows
// of x: dst[t*ldd+n] = Σ_k w[n][k] * x[t][k] over the quantized x,
//
//	= Σ_s D[n][s] * Σ_g D_x[t][g/2] * float32(Sub[n][g] * Σ_i (u_i - 32)*Q[t][i])
//
// with the sums over a group's 16 inputs exact in integers, the group and
// super-block terms added in float32. Every token is multiplied alone
// with the same kernel, so its outputs have the same bits in any batch.
func (w *Q6) MatMul(dst []float32, ldd int, x *Q8, n0, n1 int) {
	q6MatMulImpl(dst, ldd, w, x, n0, n1)
}

// q6Records holds one token's activation terms for the 6-bit products:
// its codes in the slot order of the weights (PackQ6), and per group of
// 16 inputs nbias = -32 * the sum of the group's Q and dx = the D of the
// 32-block the group lies in.
type q6Records struct {
	x     []int8
	nbias []int32
	dx    []float32
}

// q6RecordPool keeps q6Records between MatMul calls (a decode step's
// calls would otherwise allocate them, as the row kernel is called
// through a function value).
var q6RecordPool = sync.Pool{New: func() any { return new(q6Records) }}

// fill computes the records of token t of x.
func (r *q6Records) fill(x *Q8, t int) {
	K, nb := x.K, x.K/QK
	q, d := x.Q[t*K:(t+1)*K], x.D[t*nb:(t+1)*nb]
	for s := range K / Q6Super {
		src, dst := q[s*Q6Super:(s+1)*Q6Super], r.x[s*Q6Super:(s+1)*Q6Super]
		for c := range 4 {
			for b := range 64 {
				dst[64*c+b] = src[q6Input(c, b)]
			}
		}
	}
	for g := range K / Q6Group {
		var sum int32
		for _, v := range q[g*Q6Group : (g+1)*Q6Group] {
			sum += int32(v)
		}
		r.nbias[g] = -32 * sum
		r.dx[g] = d[g/2]
	}
}

// q6MatMulWith runs MatMul token by token: the records of the token,
// then rows(...) over [n0, n1). Several tokens take the rows in blocks
// of about q6BlockBytes, every token against a block before the next
// block: the weights stream from memory once for all the tokens (a
// verify pass, a few sessions' decode) and each token's rows come from
// cache, with the same kernel and the same bits as alone.
func q6MatMulWith(rows func(w *Q6, rec *q6Records, n0, n1 int, dst []float32), dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int) {
	K, ng := w.K, w.K/Q6Group
	var stack [8]*q6Records
	recs := stack[:0]
	if x.T > len(stack) {
		recs = make([]*q6Records, 0, x.T)
	}
	for t := 0; t < x.T; t++ {
		rec := q6RecordPool.Get().(*q6Records)
		if cap(rec.x) < K {
			rec.x, rec.nbias, rec.dx = make([]int8, K), make([]int32, ng), make([]float32, ng)
		}
		rec.x, rec.nbias, rec.dx = rec.x[:K], rec.nbias[:ng], rec.dx[:ng]
		rec.fill(x, t)
		recs = append(recs, rec)
	}
	defer func() {
		for _, rec := range recs {
			q6RecordPool.Put(rec)
		}
	}()
	rb := n1 - n0
	if x.T > 1 {
		rb = max(1, q6BlockBytes/(K*13/16)) // 6.5 bits a weight
	}
	for n := n0; n < n1; n += rb {
		e := min(n+rb, n1)
		for t, rec := range recs {
			rows(w, rec, n, e, dst[t*ldd:])
		}
	}
}

// q6BlockBytes is about the weight bytes of the rows that several
// tokens take in turn (q6MatMulWith): well inside a core's L2.
const q6BlockBytes = 64 << 10

// q6Kernel is the signature of the assembly row kernels: n consecutive
// rows for one token, nib, hi, sub and d addressing the first row's
// planes, x, nbias and dx the token's q6Records, ns the super-blocks per
// row; dst[i] gets row i's sum.
type q6Kernel func(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)

// q6MatMulKernel is Q6.MatMul with the row kernel k.
func q6MatMulKernel(k q6Kernel, dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int) {
	q6MatMulWith(func(w *Q6, rec *q6Records, n0, n1 int, dst []float32) {
		if n1 <= n0 {
			return
		}
		K, ns := w.K, w.K/Q6Super
		_ = dst[n1-1]
		k(&w.Nib[n0*K/2], &w.Hi[n0*K/4], &w.Sub[n0*K/Q6Group], &w.D[n0*ns], &rec.x[0], &rec.nbias[0], &rec.dx[0], ns, n1-n0, &dst[n0])
	}, dst, ldd, w, x, n0, n1)
}

// q6MatMulGeneric is the reference of Q6.MatMul.
func q6MatMulGeneric(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int) {
	q6MatMulWith(q6RowsGeneric, dst, ldd, w, x, n0, n1)
}

// q6RowsGeneric computes rows [n0, n1) for one token's records into
// dst[n], in the order of the AVX-512 kernel: lane g sums group g of
// every super-block, then the 16 lanes are added.
func q6RowsGeneric(w *Q6, rec *q6Records, n0, n1 int, dst []float32) {
	K, ns := w.K, w.K/Q6Super
	for n := n0; n < n1; n++ {
		var acc [16]float32
		for s := range ns {
			ds := w.D[n*ns+s]
			for g := range 16 {
				k0 := s*Q6Super + g*Q6Group
				dot := rec.nbias[k0/Q6Group]
				for c := range 4 {
					for l := range 4 {
						k := s*Q6Super + q6Input(c, 4*g+l)
						dot += w.code(n, k) * int32(rec.x[s*Q6Super+64*c+4*g+l])
					}
				}
				dot *= int32(w.Sub[(n*K+k0)/Q6Group])
				f := float32(float32(dot) * rec.dx[k0/Q6Group])
				acc[g] += f * ds
			}
		}
		var sum float32
		for _, a := range acc {
			sum += a
		}
		dst[n] = sum
	}
}
