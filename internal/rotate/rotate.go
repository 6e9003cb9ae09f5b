package rotate

import (
	"fmt"
	"math"
	"math/rand"
	"slices"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
)

// Options selects the rotations: R1 and R2 folded into the weights, R3
// and R4 computed online (hadamard only; see arch.Config.RotateQK and
// RotateDown).
type Options struct {
	R1, R2, R3, R4 quant.RotationKind
	Seed           int64
}

// Report records what Apply did (the quantized model's manifest keeps it).
type Report struct {
	R1      quant.RotationKind `json:"r1,omitempty"`
	R2      quant.RotationKind `json:"r2,omitempty"`
	Seed    int64              `json:"seed"`
	Untied  bool               `json:"untied,omitempty"`
	Linears int                `json:"linears_rotated"`
	Heads   int                `json:"attention_layers_rotated,omitempty"`
	// R3 and R4: the online rotations and their Hadamard block sizes.
	R3      quant.RotationKind `json:"r3,omitempty"`
	R4      quant.RotationKind `json:"r4,omitempty"`
	R3Block int                `json:"r3_block,omitempty"`
	R4Block int                `json:"r4_block,omitempty"`
	// Down is the number of down projections whose weights hold W·B (R4).
	Down int `json:"down_rotated,omitempty"`
	// What an adapter for the unrotated model needs (see AdapterMap):
	// Dim is R1's size (the residual stream's width); Gains holds, by
	// norm gain weight, the factors R1 folded into the columns of the
	// linears reading that norm (gain plus the norm's offset) before
	// resetting the gain, and Folded names, by linear weight, the norm
	// gain folded into it; R1In and R1Out list the linears whose columns
	// (W·Q) and rows (Qᵀ·W) R1 rotated; R2Layers the attention layers R2
	// rotated, in the order their rotations were drawn.
	Dim      int                  `json:"r1_dim,omitempty"`
	Gains    map[string][]float32 `json:"folded_gains,omitempty"`
	Folded   map[string]string    `json:"folded_into,omitempty"`
	R1In     []string             `json:"r1_inputs,omitempty"`
	R1Out    []string             `json:"r1_outputs,omitempty"`
	R2Layers []R2Layer            `json:"r2_layers,omitempty"`
}

// R2Layer is one attention layer R2 rotated: the value projection V,
// whose rows Lo + h·HeadDim .. of each of its KVHeads heads hold Hᵀ·W,
// and the output projection O, whose columns of each of its Heads heads
// hold W·H.
type R2Layer struct {
	V       string `json:"v"`
	Lo      int    `json:"lo,omitempty"`
	KVHeads int    `json:"kv_heads"`
	O       string `json:"o"`
	Heads   int    `json:"heads"`
	HeadDim int    `json:"head_dim"`
}

// Hadamard is an orthogonal transform x -> x Q with Q = diag(Signs) B,
// B = blockdiag(H, ..., H) / sqrt(P) with H the Sylvester Hadamard matrix of
// order P, the largest power of two dividing N (B = H / sqrt(N) when N is
// a power of two); Signs nil means all +1.
type Hadamard struct {
	N, P  int
	Signs []float32
}

// NewHadamard returns the rotation of order n of kind k.
func NewHadamard(n int, k quant.RotationKind, rng *rand.Rand) (*Hadamard, error) {
	if n < 1 {
		return nil, fmt.Errorf("rotate: size %d", n)
	}
	h := &Hadamard{N: n, P: n & -n}
	if h.P < 8 && h.P != n {
		return nil, fmt.Errorf("rotate: size %d has a power-of-two factor of only %d: no useful Walsh-Hadamard rotation", n, h.P)
	}
	switch k {
	case quant.RotationHadamard:
	case quant.RotationRandom:
		h.Signs = make([]float32, n)
		for i := range h.Signs {
			h.Signs[i] = 1
			if rng.Intn(2) == 1 {
				h.Signs[i] = -1
			}
		}
	default:
		return nil, fmt.Errorf("rotate: unknown rotation %q", string(k))
	}
	return h, nil
}

// Right sets v to v Q (v has N values).
func (h *Hadamard) Right(v []float32) {
	if h.Signs != nil {
		for i := range v {
			v[i] *= h.Signs[i]
		}
	}
	for b := 0; b < h.N; b += h.P {
		kernel.FWHT(v[b : b+h.P]) // P is a power of two
	}
	s := float32(1 / math.Sqrt(float64(h.P)))
	for i := range v {
		v[i] *= s
	}
}

// LeftT sets v to Q^T v = B diag(Signs) v (v has N values; B is
// symmetric): applied to each column of W it gives Q^T W.
func (h *Hadamard) LeftT(v []float32) { h.Right(v) } // (v^T Q)^T = Q^T v

// rightRows sets each row of w [rows, cols] (cols a multiple of N) to the
// row times blockdiag(Q, ..., Q) over columns [lo, lo+N*blocks).
func (h *Hadamard) rightCols(w []float32, cols, lo, blocks int) {
	for r := 0; r*cols < len(w); r++ {
		for b := range blocks {
			o := r*cols + lo + b*h.N
			h.Right(w[o : o+h.N])
		}
	}
}

// leftRows sets rows [lo, lo+N) of w [*, cols] to Q^T times them.
func (h *Hadamard) leftRows(w []float32, cols, lo int) {
	col := make([]float32, h.N)
	for c := range cols {
		for i := range h.N {
			col[i] = w[(lo+i)*cols+c]
		}
		h.LeftT(col)
		for i := range h.N {
			w[(lo+i)*cols+c] = col[i]
		}
	}
}

// Apply folds the rotations of opts into m's weights (and unties a tied
// classifier when R1 is on). m is changed only when it succeeds.
func Apply(m *arch.Model, opts Options) (*Report, error) {
	rep := &Report{R1: opts.R1, R2: opts.R2, R3: opts.R3, R4: opts.R4, Seed: opts.Seed}
	if opts.R1 == quant.RotationNone && opts.R2 == quant.RotationNone && opts.R3 == quant.RotationNone && opts.R4 == quant.RotationNone {
		return rep, nil
	}
	cfg := m.Config
	w := make(map[string][]float32, len(m.Weights))
	for k, v := range m.Weights {
		w[k] = v // copied on write below
	}
	cow := map[string]bool{}
	mut := func(name string) []float32 {
		if !cow[name] {
			w[name] = append([]float32(nil), w[name]...)
			cow[name] = true
		}
		return w[name]
	}
	rng := rand.New(rand.NewSource(opts.Seed))
	if opts.R1 != quant.RotationNone {
		if cfg.Tied {
			g, err := arch.Build(&cfg, arch.BuildOptions{AllLogits: true})
			if err != nil {
				return nil, err
			}
			// the tied table is looked up and multiplied by; a family may
			// have other tables (Gemma 4's per-layer embeddings)
			embeds, embed := map[string]bool{}, ""
			for _, n := range g.Nodes {
				if n.Op == op.Embed {
					embeds[n.Weight] = true
				}
			}
			for _, n := range g.Nodes {
				if n.Op == op.Linear && embeds[n.Weight] {
					embed = n.Weight
				}
			}
			cfg.Tied = false
			g2, err := arch.Build(&cfg, arch.BuildOptions{AllLogits: true})
			if err != nil {
				return nil, fmt.Errorf("rotate: untying the classifier: %w", err)
			}
			for name := range g2.Weights {
				if _, ok := w[name]; !ok {
					if embed == "" || !sameShape(g2.Weights[name], g.Weights[embed]) {
						return nil, fmt.Errorf("rotate: untying the classifier: new weight %s is not the embedding's shape", name)
					}
					w[name] = append([]float32(nil), w[embed]...)
					cow[name] = true
				}
			}
			rep.Untied = true
		}
		g, err := arch.Build(&cfg, arch.BuildOptions{AllLogits: true})
		if err != nil {
			return nil, err
		}
		n, err := r1(g, w, mut, opts.R1, rng, rep)
		if err != nil {
			return nil, err
		}
		rep.Linears = n
	}
	if opts.R2 != quant.RotationNone {
		g, err := arch.Build(&cfg, arch.BuildOptions{AllLogits: true})
		if err != nil {
			return nil, err
		}
		n, err := r2(g, w, mut, opts.R2, rng, rep)
		if err != nil {
			return nil, err
		}
		rep.Heads = n
	}
	if err := online(&cfg, w, mut, opts, rep); err != nil {
		return nil, err
	}
	m.Config, m.Weights = cfg, w
	return rep, nil
}

// online turns on the online rotations R3 and R4 in cfg and folds R4's
// inverse into the weights of the linears that read its output: x·W^T
// becomes (x·B)·(W·B)^T, B orthogonal and symmetric.
func online(cfg *arch.Config, w map[string][]float32, mut func(string) []float32, opts Options, rep *Report) error {
	for _, k := range []quant.RotationKind{opts.R3, opts.R4} {
		if k != quant.RotationNone && k != quant.RotationHadamard {
			return fmt.Errorf("rotate: online rotation %q: only hadamard is computed at run time", string(k))
		}
	}
	if opts.R3 == quant.RotationNone && opts.R4 == quant.RotationNone {
		return nil
	}
	if cfg.RotateQK && opts.R3 != quant.RotationNone || cfg.RotateDown && opts.R4 != quant.RotationNone {
		return fmt.Errorf("rotate: the model already has its online rotations")
	}
	cfg.RotateQK = cfg.RotateQK || opts.R3 != quant.RotationNone
	cfg.RotateDown = cfg.RotateDown || opts.R4 != quant.RotationNone
	g, err := arch.Build(cfg, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return err
	}
	var qk, down int
	for _, n := range g.Nodes {
		if n.Op != op.Linear || len(n.In) == 0 || g.Nodes[n.In[0]].Op != op.Hadamard {
			if n.Op == op.Hadamard {
				qk++
			}
			continue
		}
		qk++
		if n.Bias != "" {
			return fmt.Errorf("rotate: r4: %s has a bias", n.Weight)
		}
		p, cols := g.Nodes[n.In[0]].HeadDim, g.Nodes[n.In[0]].Cols
		wt := mut(n.Weight)
		for r := 0; r+cols <= len(wt); r += cols {
			op.HadamardRows(wt[r:r+cols], wt[r:r+cols], p)
		}
		down++
		rep.R4Block = p
	}
	if opts.R3 != quant.RotationNone {
		if qk-down == 0 {
			return fmt.Errorf("rotate: r3: the %s family has no rotary attention to rotate", cfg.Family)
		}
		rep.R3Block = op.HadamardBlock(cfg.HeadDim)
	}
	if opts.R4 != quant.RotationNone && down == 0 {
		return fmt.Errorf("rotate: r4: the %s family has no down projection to rotate", cfg.Family)
	}
	rep.Down = down
	return nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// r1 rotates the residual stream; it returns the number of linears changed.
func r1(g *graph.Graph, w map[string][]float32, mut func(string) []float32, kind quant.RotationKind, rng *rand.Rand, rep *Report) (int, error) {
	consumers := make([][]int, len(g.Nodes))
	uses := map[string]int{}
	for i, n := range g.Nodes {
		for _, in := range n.In {
			consumers[in] = append(consumers[in], i)
		}
		for _, s := range []string{n.Weight, n.Bias} {
			if s != "" {
				uses[s]++
			}
		}
	}
	rot := make([]bool, len(g.Nodes)) // value is in the rotated basis
	inRot := map[int]bool{}           // linear reads a rotated value
	outRot := map[int]bool{}          // linear writes a rotated value
	gainOf := map[int]int{}           // linear -> norm whose gain it absorbs
	norms := map[int]bool{}           // norms whose gain is folded
	var D int
	refuse := func(i int, why string) (int, error) {
		n := g.Nodes[i]
		return 0, fmt.Errorf("rotate: R1 does not apply to this model: node %d (%v %s) %s", i, n.Op, n.Name, why)
	}
	// linearThrough returns the linear a non-rotated residual branch ends
	// in (through scales), marking the scales rotated.
	var branch func(i int) (int, bool)
	branch = func(i int) (int, bool) {
		n := g.Nodes[i]
		switch n.Op {
		case op.Linear:
			return i, len(consumers[i]) == 1
		case op.Scale:
			if len(consumers[i]) != 1 {
				return 0, false
			}
			j, ok := branch(n.In[0])
			if ok {
				rot[i] = true
			}
			return j, ok
		}
		return 0, false
	}
	for i, n := range g.Nodes {
		anyRot := false
		for _, in := range n.In {
			anyRot = anyRot || rot[in]
		}
		switch n.Op {
		case op.Embed:
			rot[i] = true
			D = n.Cols
		case op.Add:
			a, b := n.In[0], n.In[1]
			switch {
			case rot[a] && rot[b]:
				rot[i] = true
			case rot[a] || rot[b]:
				other := b
				if rot[b] {
					other = a
				}
				l, ok := branch(other)
				if !ok {
					return refuse(i, fmt.Sprintf("adds to the residual stream a %v value that is not a linear's own output (a post-norm?)", g.Nodes[other].Op))
				}
				outRot[l] = true
				rot[i] = true
			}
		case op.Scale, op.SelectRows:
			rot[i] = anyRot
		case op.RMSNorm:
			if !anyRot {
				continue
			}
			if uses[n.Weight] > 1 {
				return refuse(i, "shares its gain with another node")
			}
			// every consumer must be a linear (through last-row selections)
			var lins []int
			var walk func(j int) bool
			walk = func(j int) bool {
				for _, c := range consumers[j] {
					switch g.Nodes[c].Op {
					case op.Linear:
						lins = append(lins, c)
					case op.SelectRows:
						rot[c] = true
						if !walk(c) {
							return false
						}
					default:
						return false
					}
				}
				return true
			}
			if !walk(i) {
				return refuse(i, "feeds something other than linears")
			}
			rot[i] = true
			norms[i] = true
			for _, l := range lins {
				gainOf[l] = i
			}
		case op.Linear:
			if anyRot {
				inRot[i] = true
			}
		default:
			if anyRot {
				return refuse(i, "reads the rotated residual stream, and a rotation does not commute with it")
			}
		}
	}
	out := g.Nodes[g.Output]
	if rot[g.Output] {
		return refuse(g.Output, "is the output and would stay rotated")
	}
	_ = out
	q, err := NewHadamard(D, kind, rng)
	if err != nil {
		return 0, err
	}
	for l := range inRot {
		if uses[g.Nodes[l].Weight] > 1 {
			return refuse(l, "shares its weight with another node")
		}
	}
	for l := range outRot {
		if uses[g.Nodes[l].Weight] > 1 {
			return refuse(l, "shares its weight with another node")
		}
	}
	changed := map[int]bool{}
	rep.Dim, rep.Gains, rep.Folded = D, map[string][]float32{}, map[string]string{}
	// fold the norm gains into the linears reading them, then set them to 1
	for l, ni := range gainOf {
		nn := g.Nodes[ni]
		gain := w[nn.Weight]
		if rep.Gains[nn.Weight] == nil {
			f := make([]float32, len(gain))
			for j, v := range gain {
				f[j] = v + nn.Offset
			}
			rep.Gains[nn.Weight] = f
		}
		rep.Folded[g.Nodes[l].Weight] = nn.Weight
		wl := mut(g.Nodes[l].Weight)
		k := len(gain)
		for j := range wl {
			wl[j] *= gain[j%k] + nn.Offset
		}
		changed[l] = true
	}
	for ni := range norms {
		nn := g.Nodes[ni]
		gain := mut(nn.Weight)
		for j := range gain {
			gain[j] = 1 - nn.Offset
		}
	}
	for l := range inRot {
		n := g.Nodes[l]
		wl := mut(n.Weight)
		k := len(wl) / n.Cols
		if k != D {
			return refuse(l, fmt.Sprintf("reads %d columns, the stream has %d", k, D))
		}
		q.rightCols(wl, k, 0, 1)
		changed[l] = true
		rep.R1In = append(rep.R1In, n.Weight)
	}
	slices.Sort(rep.R1In)
	for l := range outRot {
		n := g.Nodes[l]
		if n.Cols != D {
			return refuse(l, fmt.Sprintf("writes %d columns, the stream has %d", n.Cols, D))
		}
		wl := mut(n.Weight)
		q.leftRows(wl, len(wl)/D, 0)
		if n.Bias != "" {
			q.Right(mut(n.Bias))
		}
		changed[l] = true
		rep.R1Out = append(rep.R1Out, n.Weight)
	}
	slices.Sort(rep.R1Out)
	for _, n := range g.Nodes {
		if n.Op == op.Embed {
			q.rightCols(mut(n.Weight), D, 0, 1)
		}
	}
	return len(changed), nil
}

// r2 rotates each attention layer's values and output projection columns
// per head; it returns the number of attention layers changed.
func r2(g *graph.Graph, w map[string][]float32, mut func(string) []float32, kind quant.RotationKind, rng *rand.Rand, rep *Report) (int, error) {
	consumers := make([][]int, len(g.Nodes))
	uses := map[string]int{}
	for i, n := range g.Nodes {
		for _, in := range n.In {
			consumers[in] = append(consumers[in], i)
		}
		if n.Weight != "" {
			uses[n.Weight]++
		}
	}
	refuse := func(i int, why string) (int, error) {
		n := g.Nodes[i]
		return 0, fmt.Errorf("rotate: R2 does not apply to this model: attention node %d (%s) %s", i, n.Name, why)
	}
	hs := map[int]*Hadamard{}
	count := 0
	for i, n := range g.Nodes {
		if n.Op != op.Attention {
			continue
		}
		a := n.Attn
		E := a.HeadDim
		h := hs[E]
		if h == nil {
			var err error
			if h, err = NewHadamard(E, kind, rng); err != nil {
				return 0, err
			}
			hs[E] = h
		}
		// the values: a linear, or columns of a fused one
		vi := n.In[2]
		lo := 0
		vn := g.Nodes[vi]
		if vn.Op == op.Columns {
			if len(consumers[vi]) != 1 {
				return refuse(i, "has values read elsewhere")
			}
			lo, vi = vn.Lo, vn.In[0]
			vn = g.Nodes[vi]
		} else if len(consumers[vi]) != 1 {
			return refuse(i, "has values read elsewhere")
		}
		if vn.Op != op.Linear || uses[vn.Weight] > 1 {
			return refuse(i, fmt.Sprintf("takes its values from a %v node, not a projection of their own", vn.Op))
		}
		// the output: one linear reading all heads
		if len(consumers[i]) != 1 || g.Nodes[consumers[i][0]].Op != op.Linear {
			return refuse(i, "output is not read by one linear")
		}
		on := g.Nodes[consumers[i][0]]
		if uses[on.Weight] > 1 {
			return refuse(i, "output projection shares its weight")
		}
		wv := mut(vn.Weight)
		kv := len(wv) / vn.Cols
		for gh := range a.KVHeads {
			h.leftRows(wv, kv, lo+gh*E)
		}
		if vn.Bias != "" {
			b := mut(vn.Bias)
			for gh := range a.KVHeads {
				h.Right(b[lo+gh*E : lo+(gh+1)*E])
			}
		}
		wo := mut(on.Weight)
		k := len(wo) / on.Cols
		if k != a.Heads*E {
			return refuse(i, fmt.Sprintf("output projection reads %d columns, the heads give %d", k, a.Heads*E))
		}
		h.rightCols(wo, k, 0, a.Heads)
		rep.R2Layers = append(rep.R2Layers, R2Layer{V: vn.Weight, Lo: lo, KVHeads: a.KVHeads, O: on.Weight, Heads: a.Heads, HeadDim: E})
		count++
	}
	return count, nil
}
