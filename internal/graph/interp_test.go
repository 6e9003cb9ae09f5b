package graph

import (
	"math"
	"math/cmplx"
	"math/rand"
	"testing"
)

func randSlice(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestRoPEComplex checks both pairings against rotation by multiplication
// with e^{i*p*f} in complex128, for full and partial rotary widths.
func TestRoPEComplex(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, style := range []RopeStyle{RopeInterleaved, RopeHalf} {
		for _, rot := range []int{16, 8} {
			const E, heads, T, pos = 16, 3, 4, 7
			freqs := make([]float64, rot/2)
			for i := range freqs {
				freqs[i] = 1 / math.Pow(10000, float64(2*i)/float64(rot))
			}
			ro := &Rope{Style: style, HeadDim: E, RotDim: rot, InvFreq: freqs}
			x := randSlice(r, T*heads*E)
			got := append([]float32(nil), x...)
			rope(got, T, heads*E, pos, ro)
			for tt := 0; tt < T; tt++ {
				for h := 0; h < heads; h++ {
					base := tt*heads*E + h*E
					for i := 0; i < rot/2; i++ {
						a, b := base+2*i, base+2*i+1
						if style == RopeHalf {
							a, b = base+i, base+i+rot/2
						}
						z := complex(float64(x[a]), float64(x[b])) * cmplx.Exp(complex(0, float64(pos+tt)*freqs[i]))
						if math.Abs(real(z)-float64(got[a])) > 1e-5 || math.Abs(imag(z)-float64(got[b])) > 1e-5 {
							t.Fatalf("%v rot %d: pair %d of head %d row %d: got (%v,%v) want %v", style, rot, i, h, tt, got[a], got[b], z)
						}
					}
					for d := rot; d < E; d++ {
						if got[base+d] != x[base+d] {
							t.Fatalf("%v: pass-through dim %d changed", style, d)
						}
					}
				}
			}
		}
	}
}

// naiveAttention is attention over full q, k, v [T, *] for positions 0..T-1
// in float64.
func naiveAttention(q, k, v []float32, T, H, G, E, window int, scale float64) []float64 {
	out := make([]float64, T*H*E)
	for t := 0; t < T; t++ {
		for h := 0; h < H; h++ {
			g := h / (H / G)
			var ws []float64
			var js []int
			mx := math.Inf(-1)
			for j := 0; j <= t; j++ {
				if window > 0 && t-j >= window {
					continue
				}
				var s float64
				for e := 0; e < E; e++ {
					s += float64(q[t*H*E+h*E+e]) * float64(k[j*G*E+g*E+e])
				}
				s *= scale
				ws = append(ws, s)
				js = append(js, j)
				mx = math.Max(mx, s)
			}
			var z float64
			for i := range ws {
				ws[i] = math.Exp(ws[i] - mx)
				z += ws[i]
			}
			for i, j := range js {
				for e := 0; e < E; e++ {
					out[t*H*E+h*E+e] += ws[i] / z * float64(v[j*G*E+g*E+e])
				}
			}
		}
	}
	return out
}

// TestAttentionChunks runs attention over a sequence split into chunks of
// every size and compares with the naive version (tolerance 1e-5 absolute),
// with and without a sliding window.
func TestAttentionChunks(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	const T, H, G, E = 11, 4, 2, 8
	q, k, v := randSlice(r, T*H*E), randSlice(r, T*G*E), randSlice(r, T*G*E)
	for _, window := range []int{0, 3} {
		want := naiveAttention(q, k, v, T, H, G, E, window, 0.35)
		for chunk := 1; chunk <= T; chunk++ {
			st := &State{Ctx: T, cols: G * E, K: [][]float32{make([]float32, T*G*E)}, V: [][]float32{make([]float32, T*G*E)}}
			a := &Attn{Heads: H, KVHeads: G, HeadDim: E, Scale: 0.35, Window: window}
			got := make([]float32, T*H*E)
			for p := 0; p < T; p += chunk {
				n := min(chunk, T-p)
				attention(got[p*H*E:(p+n)*H*E], q[p*H*E:(p+n)*H*E], k[p*G*E:(p+n)*G*E], v[p*G*E:(p+n)*G*E], n, st, a, nil, 1)
				st.Pos += n
			}
			for i := range got {
				if math.Abs(float64(got[i])-want[i]) > 1e-5 {
					t.Fatalf("window %d chunk %d: out[%d] = %v, want %v", window, chunk, i, got[i], want[i])
				}
			}
		}
	}
}

func tinyGraph(r *rand.Rand) (*Graph, Weights) {
	const V, D, H, G, E, F = 19, 16, 4, 2, 4, 24
	g := New()
	x := g.Embed(g.Tokens(), "emb", V, D)
	h := g.RMSNorm(x, "n1", 1e-5, 0)
	freqs := []float64{1, 0.1}
	ro := Rope{Style: RopeHalf, HeadDim: E, RotDim: E, InvFreq: freqs}
	q := g.RoPE(g.Linear(h, "wq", H*E, "bq"), ro)
	k := g.RoPE(g.Linear(h, "wk", G*E, ""), ro)
	v := g.Linear(h, "wv", G*E, "")
	a := g.Attention(q, k, v, Attn{Layer: 0, Heads: H, KVHeads: G, HeadDim: E, Scale: 0.5})
	x = g.Add(x, g.Linear(a, "wo", D, ""))
	m := g.Mul(g.SiLU(g.Linear(x, "w1", F, "")), g.GELUTanh(g.Linear(x, "w3", F, "")))
	x = g.Add(x, g.Scale(g.Linear(m, "w2", D, ""), 0.5))
	g.SetOutput(g.Linear(g.Columns(x, 0, D), "emb", V, ""))
	w := Weights{}
	for name, shape := range g.Weights {
		n := 1
		for _, d := range shape {
			n *= d
		}
		w[name] = randSlice(r, n)
	}
	return g, w
}

// TestIncrementalEqualsPrefill checks the cache: logits of a sequence fed in
// one pass equal those of the same sequence fed in chunks (1e-5).
func TestIncrementalEqualsPrefill(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	g, w := tinyGraph(r)
	in, err := NewInterpreter(g, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}
	full, rows, err := in.Run(in.NewState(16), ids)
	if err != nil || rows != len(ids) {
		t.Fatalf("run: %v (%d rows)", err, rows)
	}
	for _, chunk := range []int{1, 3, 4} {
		st := in.NewState(16)
		for p := 0; p < len(ids); p += chunk {
			part := ids[p:min(p+chunk, len(ids))]
			out, _, err := in.Run(st, part)
			if err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if d := math.Abs(float64(out[i] - full[p*19+i])); d > 1e-5 {
					t.Fatalf("chunk %d: position %d differs by %v", chunk, p+i/19, d)
				}
			}
		}
	}
}

func TestRunErrors(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	g, w := tinyGraph(r)
	in, err := NewInterpreter(g, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := in.NewState(4)
	if _, _, err := in.Run(st, []int{1, 2, 3, 4, 5}); err == nil {
		t.Fatal("overfilled context accepted")
	}
	if st.Pos != 0 {
		t.Fatal("failed run moved the position")
	}
	if _, _, err := in.Run(st, []int{19}); err == nil {
		t.Fatal("out-of-range token accepted")
	}
	delete(w, "wq")
	if _, err := NewInterpreter(g, w, 1); err == nil {
		t.Fatal("missing weight accepted")
	}
	w["wq"] = make([]float32, 3)
	if _, err := NewInterpreter(g, w, 1); err == nil {
		t.Fatal("wrong-sized weight accepted")
	}
}

// TestLinearThreads checks the parallel split gives bit-identical results
// (each output is summed in the same order by one goroutine), with a bias.
func TestLinearThreads(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	const T, K, N = 3, 96, 301
	x, w, b := randSlice(r, T*K), randSlice(r, N*K), randSlice(r, N)
	one, two := make([]float32, T*N), make([]float32, T*N)
	linear(one, x, w, b, T, K, N, 1)
	linear(two, x, w, b, T, K, N, 2)
	for i := range one {
		if one[i] != two[i] {
			t.Fatalf("out[%d]: %v with 1 thread, %v with 2", i, one[i], two[i])
		}
		tt, n := i/N, i%N
		var s float64
		for k := 0; k < K; k++ {
			s += float64(x[tt*K+k]) * float64(w[n*K+k])
		}
		if math.Abs(s+float64(b[n])-float64(one[i])) > 1e-4 {
			t.Fatalf("out[%d] = %v, float64 reference %v", i, one[i], s+float64(b[n]))
		}
	}
}

// TestAttentionTiles: bidirectional attention within Tile x Tile squares
// of the 2-D positions equals bidirectional attention run apart on the
// rows of each square (tolerance 1e-5 absolute), whatever the row order;
// without tiles the result differs.
func TestAttentionTiles(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const H, G, E, tile = 4, 2, 8, 3
	// a 5x4 grid of positions in a scrambled order: tiles of 3x3, 3x1,
	// 2x3, 2x1 rows
	var pos []int
	for _, i := range r.Perm(20) {
		pos = append(pos, i/4, i%4)
	}
	T := len(pos) / 2
	q, k, v := randSlice(r, T*H*E), randSlice(r, T*G*E), randSlice(r, T*G*E)
	run := func(a *Attn, q, k, v []float32, pos []int) []float32 {
		n := len(pos) / 2
		st := &State{Ctx: n, cols: G * E, K: [][]float32{make([]float32, n*G*E)}, V: [][]float32{make([]float32, n*G*E)}}
		out := make([]float32, n*H*E)
		attention(out, q, k, v, n, st, a, pos, 2)
		return out
	}
	got := run(&Attn{Heads: H, KVHeads: G, HeadDim: E, Scale: 0.35, Bidirectional: true, Tile: tile}, q, k, v, pos)
	all := run(&Attn{Heads: H, KVHeads: G, HeadDim: E, Scale: 0.35, Bidirectional: true}, q, k, v, pos)
	groups := map[int64][]int{}
	for i := 0; i < T; i++ {
		key := TileKey(pos[2*i], pos[2*i+1], tile)
		groups[key] = append(groups[key], i)
	}
	if len(groups) != 4 {
		t.Fatalf("%d tiles, want 4", len(groups))
	}
	var apart float64
	for _, rows := range groups {
		var gq, gk, gv []float32
		var gp []int
		for _, i := range rows {
			gq = append(gq, q[i*H*E:(i+1)*H*E]...)
			gk = append(gk, k[i*G*E:(i+1)*G*E]...)
			gv = append(gv, v[i*G*E:(i+1)*G*E]...)
			gp = append(gp, pos[2*i], pos[2*i+1])
		}
		want := run(&Attn{Heads: H, KVHeads: G, HeadDim: E, Scale: 0.35, Bidirectional: true}, gq, gk, gv, gp)
		for j, i := range rows {
			for c := 0; c < H*E; c++ {
				d := math.Abs(float64(got[i*H*E+c] - want[j*H*E+c]))
				if d > 1e-5 {
					t.Fatalf("row %d: out[%d] = %v, want %v", i, c, got[i*H*E+c], want[j*H*E+c])
				}
				apart = max(apart, math.Abs(float64(all[i*H*E+c]-want[j*H*E+c])))
			}
		}
	}
	if apart < 1e-2 {
		t.Fatalf("attention over all rows differs from the tiles' by only %g", apart)
	}
}
