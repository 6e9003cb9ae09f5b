package graph

import (
	"math"
	"sync"

	"github.com/aotlm/aotlm/internal/kernel"
)

// linear computes dst[t][j] = sum_k x[t][k]*w[j][k] (+ b[j]) for T rows,
// x [T, K], w [N, K], dst [T, N], on the SIMD row kernel kernel.DotRows,
// which reads each weight row once for all T rows and sums each row in
// the same order whatever T is (TestDotRowsSameWhateverRows), so a
// sequence run in one pass or token by token gives the same values; the
// engine makes the same calls, so the interpreter and a compiled float32
// artifact agree.
func linear(dst, x, w, b []float32, T, K, N, threads int) {
	x = x[:T*K]
	work := func(j0, j1 int) {
		tmp := make([]float32, T)
		for j := j0; j < j1; j++ {
			var bj float32
			if b != nil {
				bj = b[j]
			}
			kernel.DotRows(tmp, w[j*K:(j+1)*K], x, K)
			for t, v := range tmp {
				dst[t*N+j] = v + bj
			}
		}
	}
	parallel(N, T*N*K, threads, work)
}

// parallel splits [0, n) into contiguous chunks over up to threads goroutines
// when the work (in multiply-adds) is large enough to pay for them.
func parallel(n, cost, threads int, f func(lo, hi int)) {
	if threads <= 1 || cost < 1<<16 || n < 2 {
		f(0, n)
		return
	}
	if threads > n {
		threads = n
	}
	var wg sync.WaitGroup
	chunk := (n + threads - 1) / threads
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// rmsNorm normalizes each row of x [T, C] by its root mean square.
func rmsNorm(dst, x, w []float32, C int, eps, offset float32) {
	for t := 0; t*C < len(x); t++ {
		row := x[t*C : (t+1)*C]
		var ss float32
		for _, v := range row {
			ss += v * v
		}
		ss = ss/float32(C) + eps
		inv := float32(1 / math.Sqrt(float64(ss)))
		for c, v := range row {
			dst[t*C+c] = (w[c] + offset) * (inv * v)
		}
	}
}

func silu(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }

// geluTanh is 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))).
func geluTanh(v float32) float32 {
	x := float64(v)
	return float32(0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))))
}

// rope rotates every head of x [T, C] in place; row t is at position pos+t.
func rope(x []float32, T, C, pos int, r *Rope) { ropeAt(x, T, C, pos, r, nil, 1) }

// ropeAt is rope where, with positions set (P components a row), pair i of row t at
// positions[t*P+r.Component(i)]. With r.Scale other than 0 and 1, cos and
// sin are multiplied by it.
func ropeAt(x []float32, T, C, pos int, r *Rope, positions []int, P int) {
	E, half := r.HeadDim, r.RotDim/2
	cos := make([]float32, half)
	sin := make([]float32, half)
	for t := 0; t < T; t++ {
		for i, f := range r.InvFreq {
			p := float64(pos + t)
			if positions != nil {
				p = float64(positions[t*P+r.Component(i)])
			}
			s, c := math.Sincos(p * f)
			if m := r.Scale; m != 0 && m != 1 {
				s, c = s*m, c*m
			}
			cos[i], sin[i] = float32(c), float32(s)
		}
		for h := 0; h*E < C; h++ {
			head := x[t*C+h*E : t*C+(h+1)*E]
			for i := 0; i < half; i++ {
				a, b := 2*i, 2*i+1
				if r.Style == RopeHalf {
					a, b = i, i+half
				}
				v0, v1 := head[a], head[b]
				head[a] = v0*cos[i] - v1*sin[i]
				head[b] = v0*sin[i] + v1*cos[i]
			}
		}
	}
}

// attention writes k, v [T, G*E] (unless nil) into the cache at st.Pos..
// (causal attention; bidirectional attention reads them alone) and computes
// out [T, H*E] from q [T, H*E]. pos holds P position components a row
// (read by Attn.Tile).
func attention(out, q, k, v []float32, T int, st *State, a *Attn, pos []int, P int) {
	var tile []int64 // the tile of each row of the pass, with Attn.Tile
	if a.Tile > 0 {
		tile = make([]int64, T)
		for t := range tile {
			tile[t] = TileKey(pos[t*P], pos[t*P+1], a.Tile)
		}
	}
	E, G, H := a.HeadDim, a.KVHeads, a.Heads
	kvc := G * E
	// bidirectional attention sees the rows of the pass alone, from k
	// and v; causal attention writes them into the cache and reads it
	K, V, cols, at := k, v, kvc, 0
	if !a.Bidirectional {
		K, V, cols, at = st.K[a.Layer], st.V[a.Layer], st.cols, st.Pos
		for t := 0; k != nil && t < T; t++ { // nil k: a shared slot, written already
			copy(K[(at+t)*cols:(at+t)*cols+kvc], k[t*kvc:(t+1)*kvc])
			copy(V[(at+t)*cols:(at+t)*cols+kvc], v[t*kvc:(t+1)*kvc])
		}
	}
	group := H / G
	scores := make([]float32, at+T)
	for t := 0; t < T; t++ {
		p := at + t
		first := 0
		switch {
		case a.Bidirectional && a.Window > 0:
			// a symmetric window: Window/2 positions either side
			first, p = max(0, p-a.Window/2), min(at+T-1, p+a.Window/2)
		case a.Bidirectional:
			p = at + T - 1
		case a.Window > 0 && p-a.Window+1 > 0:
			first = p - a.Window + 1
		}
		for h := 0; h < H; h++ {
			qh := q[t*H*E+h*E : t*H*E+(h+1)*E]
			g := h / group
			mx := float32(math.Inf(-1))
			for j := first; j <= p; j++ {
				s := kernel.Dot(qh, K[j*cols+g*E:j*cols+(g+1)*E]) * a.Scale
				if tile != nil && (j < at || tile[j-at] != tile[t]) {
					s = float32(math.Inf(-1))
				}
				scores[j] = s
				if s > mx {
					mx = s
				}
			}
			var sum float32
			for j := first; j <= p; j++ {
				e := float32(math.Exp(float64(scores[j] - mx)))
				scores[j] = e
				sum += e
			}
			oh := out[t*H*E+h*E : t*H*E+(h+1)*E]
			clear(oh)
			for j := first; j <= p; j++ {
				kernel.Axpy(oh, scores[j]/sum, V[j*cols+g*E:j*cols+(g+1)*E])
			}
		}
	}
}
