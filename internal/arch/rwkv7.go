package arch

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// RWKV-7 ("Goose"), the recurrent family, as BlinkDL's RWKV-LM trains it
// and saves it with torch.save (a state dict without a config): layers are
// numbered from 1, tensor names are e.weight, ln{l}a/b, rwkv{l}.*,
// rosa{l}.*, ffn{l}.*, lno, o. Per layer l, on the residual stream x:
//
//	xa = LayerNorm_a(x);  sx = token_shift(xa);  x_m = xa + (sx - xa) * mu_m  (m = r w k v a g)
//	r = receptance(x_r); k = key(x_k); v = value(x_v)
//	w = w0 + tanh(x_w @ w1) @ w2                (decay, before -softplus(-w) - 0.5)
//	a = sigmoid(a0 + (x_a @ a1) @ a2);  g = sigmoid(x_g @ g1) @ g2
//	v += (v_first - v) * sigmoid(v0 + (x_v @ v1) @ v2)    (layers after the first;
//	                                                       the first keeps v_first = v)
//	x += output(wkv7(r, w, k, v, a) * g) + rosa{l}.o.bias
//	xb = LayerNorm_b(x);  x += value(relu(key(xb + (shift(xb) - xb) * mu_k))^2)
//
// then logits = o(lno(x)) (with bias). Traps: there is no ln0; LayerNorm
// eps is 1e-5 but ln_x is a GroupNorm (one group per head) with eps 64e-5;
// the ROSA branch is off (its rosa_qkv.emb is zero), so its output is
// exactly its output Linear's bias, which must still be added (we fold it
// into the time-mix output Linear as its bias); the LoRA matrices are used
// as x @ W, so they are stored transposed here for linear ops.
//
// Canonical weight names are the checkpoint's, with these differences in
// value: the LoRA matrices {w,a,v,g}{1,2} are transposed ([out, in]),
// [1,1,C] parameters and r_k [H, E] are flattened to [C].

// RWKVConfig holds the sizes RWKV-7 adds to Config.
type RWKVConfig struct {
	DecayLoRA    int     `json:"decay_lora"` // columns of w1
	ALoRA        int     `json:"a_lora"`     // columns of a1
	VLoRA        int     `json:"v_lora"`     // columns of v1 (0 with one layer)
	GateLoRA     int     `json:"g_lora"`     // columns of g1
	GroupNormEps float64 `json:"group_norm_eps"`
}

// rwkv7Context bounds the positions of a session: the model itself has no
// limit, but sessions and artifacts count positions.
const rwkv7Context = 4096

func init() {
	register(&Family{
		Name: "rwkv7",
		configHF: func(map[string]any) (Config, error) {
			return Config{}, errors.New("rwkv7: no config.json form; open the PyTorch .pth checkpoint")
		},
		configGGUF: func(map[string]any, string) (Config, error) {
			return Config{}, errors.New("rwkv7: GGUF files are not supported; open the PyTorch .pth checkpoint")
		},
		tensorNames: func(_, canonical string) (string, bool) { return canonical, true },
		build:       buildRWKV7,
		validate:    validateRWKV7,
		load:        loadRWKV7,
		// the loader transposes the inner low-rank matrices and reshapes
		// r_k and the per-channel vectors; the projections stay as stored
		loadedAsStored: func(n string) bool {
			return !rwkvLoRA(n) && !strings.HasSuffix(n, ".r_k") && !rwkvFlat(n)
		},
	})
}

// pytorchConfig infers the config of a PyTorch state dict from its tensor
// shapes; RWKV-7 is the only family read from .pth files.
func pytorchConfig(ck format.Checkpoint) (Config, *Family, error) {
	f := familyByName("rwkv7")
	shape := func(name string, dims int) ([]int64, error) {
		t, ok := format.Find(ck, name)
		if !ok {
			return nil, fmt.Errorf("pytorch checkpoint has no tensor %q (only RWKV-7 state dicts are recognized)", name)
		}
		if len(t.Shape) != dims {
			return nil, fmt.Errorf("rwkv7: tensor %q has shape %v, want %d dimensions", name, t.Shape, dims)
		}
		for _, d := range t.Shape {
			if d < 1 || d > 1<<24 {
				return nil, fmt.Errorf("rwkv7: tensor %q has shape %v", name, t.Shape)
			}
		}
		return t.Shape, nil
	}
	c := Config{Family: "rwkv7", Source: "pytorch", Context: rwkv7Context, NormEps: 1e-5, BOS: -1,
		RWKV: &RWKVConfig{GroupNormEps: 64e-5}}
	e, err := shape("e.weight", 2)
	if err != nil {
		return c, f, err
	}
	c.Vocab, c.Hidden = int(e[0]), int(e[1])
	for {
		if _, ok := format.Find(ck, fmt.Sprintf("rwkv%d.r_k", c.Layers+1)); !ok {
			break
		}
		c.Layers++
	}
	rk, err := shape("rwkv1.r_k", 2)
	if err != nil {
		return c, f, err
	}
	c.Heads, c.HeadDim = int(rk[0]), int(rk[1])
	c.KVHeads = c.Heads
	dims := []struct {
		name string
		dst  *int
		col  int
	}{{"ffn1.key.weight", &c.FFN, 0}, {"rwkv1.w1", &c.RWKV.DecayLoRA, 1},
		{"rwkv1.a1", &c.RWKV.ALoRA, 1}, {"rwkv1.g1", &c.RWKV.GateLoRA, 1}}
	if c.Layers > 1 {
		dims = append(dims, struct {
			name string
			dst  *int
			col  int
		}{"rwkv2.v1", &c.RWKV.VLoRA, 1})
	}
	for _, d := range dims {
		s, err := shape(d.name, 2)
		if err != nil {
			return c, f, err
		}
		*d.dst = int(s[d.col])
	}
	return c, f, nil
}

// familyByName returns the registered family called name.
func familyByName(name string) *Family {
	for _, f := range families {
		if f.Name == name {
			return f
		}
	}
	return nil
}

func validateRWKV7(c *Config) error {
	r := c.RWKV
	if r == nil {
		return errors.New("rwkv7 config: the rwkv sizes are missing")
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"hidden size", c.Hidden}, {"feed-forward size", c.FFN}, {"layer count", c.Layers},
		{"head count", c.Heads}, {"head size", c.HeadDim}, {"vocabulary size", c.Vocab},
		{"context length", c.Context}, {"decay LoRA size", r.DecayLoRA}, {"a LoRA size", r.ALoRA},
		{"gate LoRA size", r.GateLoRA}} {
		if p.v <= 0 || p.v > 1<<24 {
			return fmt.Errorf("rwkv7 config: %s %d is out of range", p.name, p.v)
		}
	}
	if c.Layers > 1 && (r.VLoRA <= 0 || r.VLoRA > 1<<24) {
		return fmt.Errorf("rwkv7 config: value LoRA size %d is out of range", r.VLoRA)
	}
	if c.Heads*c.HeadDim != c.Hidden {
		return fmt.Errorf("rwkv7 config: %d heads of %d do not make the hidden size %d", c.Heads, c.HeadDim, c.Hidden)
	}
	for _, e := range []float64{c.NormEps, r.GroupNormEps} {
		if !(e > 0 && e < 1) {
			return fmt.Errorf("rwkv7 config: norm epsilon %v out of range", e)
		}
	}
	return nil
}

func buildRWKV7(c *Config, opts BuildOptions) (*graph.Graph, error) {
	g := graph.New()
	C := c.Hidden
	x := g.Embed(g.Tokens(), "e.weight", c.Vocab, C)
	eps := float32(c.NormEps)
	vFirst := -1
	for l := 1; l <= c.Layers; l++ {
		att := fmt.Sprintf("rwkv%d.", l)
		n := func(s string) string { return att + s }
		xa := g.LayerNorm(x, fmt.Sprintf("ln%da.weight", l), fmt.Sprintf("ln%da.bias", l), eps)
		sx := g.TokenShift(xa, n("shift"))
		mix := func(m string) int { return g.Mix(xa, sx, n("x_"+m)) }
		xr, xw, xk, xv, xaa, xg := mix("r"), mix("w"), mix("k"), mix("v"), mix("a"), mix("g")
		r := g.Linear(xr, n("receptance.weight"), C, "")
		w := g.Linear(g.Tanh(g.Linear(xw, n("w1"), c.RWKV.DecayLoRA, "")), n("w2"), C, n("w0"))
		k := g.Linear(xk, n("key.weight"), C, "")
		v := g.Linear(xv, n("value.weight"), C, "")
		if vFirst < 0 {
			vFirst = v
		} else {
			gate := g.Sigmoid(g.Linear(g.Linear(xv, n("v1"), c.RWKV.VLoRA, ""), n("v2"), C, n("v0")))
			v = g.Add(v, g.Mul(g.Sub(vFirst, v), gate))
		}
		a := g.Sigmoid(g.Linear(g.Linear(xaa, n("a1"), c.RWKV.ALoRA, ""), n("a2"), C, n("a0")))
		gt := g.Linear(g.Sigmoid(g.Linear(xg, n("g1"), c.RWKV.GateLoRA, "")), n("g2"), C, "")
		y := g.WKV7(r, w, k, v, a, graph.WKV7Weights{KK: n("k_k"), KA: n("k_a"), RK: n("r_k"),
			GNW: n("ln_x.weight"), GNB: n("ln_x.bias")}, c.HeadDim, float32(c.RWKV.GroupNormEps), n("wkv7"))
		x = g.Add(x, g.Linear(g.Mul(y, gt), n("output.weight"), C, fmt.Sprintf("rosa%d.o.bias", l)))

		ffn := fmt.Sprintf("ffn%d.", l)
		xb := g.LayerNorm(x, fmt.Sprintf("ln%db.weight", l), fmt.Sprintf("ln%db.bias", l), eps)
		kx := g.Mix(xb, g.TokenShift(xb, ffn+"shift"), ffn+"x_k")
		h := g.ReLU(g.Linear(kx, ffn+"key.weight", c.FFN, ""))
		x = g.Add(x, g.Linear(g.Mul(h, h), ffn+"value.weight", C, ""))
	}
	x = g.LayerNorm(x, "lno.weight", "lno.bias", eps)
	x = g.Linear(x, "o.weight", c.Vocab, "o.bias")
	if !opts.AllLogits {
		x = g.LastRow(x)
	}
	g.SetOutput(x)
	return g, nil
}

// rwkvLoRA reports whether a canonical name is a LoRA matrix ({w,a,v,g}{1,2}).
func rwkvLoRA(name string) bool {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || !strings.HasPrefix(name, "rwkv") {
		return false
	}
	s := name[i+1:]
	return len(s) == 2 && strings.ContainsRune("wavg", rune(s[0])) && (s[1] == '1' || s[1] == '2')
}

// rwkvFlat reports whether a canonical [C] weight is stored as [1, 1, C].
func rwkvFlat(name string) bool {
	i := strings.LastIndexByte(name, '.')
	s := name[i+1:]
	return strings.HasPrefix(s, "x_") || s == "w0" || s == "a0" || s == "v0" || s == "k_k" || s == "k_a"
}

// loadRWKV7 reads every weight g names, checking each against the shape it
// has in the checkpoint, and reshapes as the canonical names say.
func loadRWKV7(ck format.Checkpoint, c *Config, g *graph.Graph) (graph.Weights, error) {
	w := graph.Weights{}
	for name, shape := range g.Weights {
		want := shape
		switch {
		case rwkvLoRA(name):
			want = []int{shape[1], shape[0]}
		case strings.HasSuffix(name, ".r_k"):
			want = []int{c.Heads, c.HeadDim}
		case rwkvFlat(name):
			want = []int{1, 1, shape[0]}
		}
		info, ok := format.Find(ck, name)
		if !ok {
			return nil, fmt.Errorf("rwkv7: checkpoint has no tensor %q", name)
		}
		if !shapeIs(info.Shape, want) {
			return nil, fmt.Errorf("rwkv7: tensor %q has shape %v, the config implies %v", name, info.Shape, want)
		}
		v, err := ck.ReadFloat32(name)
		if err != nil {
			return nil, fmt.Errorf("rwkv7: reading %q: %w", name, err)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("rwkv7: tensor %q holds %v at index %d", name, x, i)
			}
		}
		if rwkvLoRA(name) {
			v = transpose(v, want[0], want[1])
		}
		w[name] = v
	}
	// the ROSA branch must be off: its output is then its bias alone
	for l := 1; l <= c.Layers; l++ {
		name := fmt.Sprintf("rosa%d.rosa_qkv.emb", l)
		if _, ok := format.Find(ck, name); !ok {
			continue
		}
		v, err := ck.ReadFloat32(name)
		if err != nil {
			return nil, fmt.Errorf("rwkv7: reading %q: %w", name, err)
		}
		for _, x := range v {
			if x != 0 {
				return nil, fmt.Errorf("rwkv7: tensor %q is not zero: an active ROSA branch is not supported", name)
			}
		}
	}
	return w, nil
}

// transpose returns the [cols, rows] transpose of v [rows, cols].
func transpose(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			out[j*rows+i] = v[i*cols+j]
		}
	}
	return out
}
