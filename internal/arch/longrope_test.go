package arch

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// longRopeFixture is the phi3 fixture's config.json (rotary size 18,
// max_position_embeddings 256) with original_max_position_embeddings set
// to orig and a longrope block of factors drawn from [1, 4).
func longRopeFixture(t testing.TB, r *rand.Rand, orig int) (m map[string]any, short, long []float64) {
	m = fixtureConfig(t, "phi3")
	short, long = make([]float64, 9), make([]float64, 9)
	var sa, la []any
	for i := range short {
		short[i], long[i] = 1+3*r.Float64(), 1+3*r.Float64()
		sa, la = append(sa, short[i]), append(la, long[i])
	}
	m["original_max_position_embeddings"] = float64(orig)
	m["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": sa, "long_factor": la}
	return m, short, long
}

// hfLongRope applies Hugging Face's longrope to x [T, heads*E] at
// positions pos.. in float64, written from its definition: inv_freq_i =
// 1/(ext_i * base^(2i/R)), cos and sin of position*inv_freq times the
// attention factor, NeoX pairs (i, i+R/2) over the first R dimensions.
func hfLongRope(x []float32, T, heads, E, R, pos int, base float64, ext []float64, attn float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	for t := 0; t < T; t++ {
		for h := 0; h < heads; h++ {
			o := t*heads*E + h*E
			for i := 0; i < R/2; i++ {
				inv := 1 / (ext[i] * math.Pow(base, float64(2*i)/float64(R)))
				c := math.Cos(float64(pos+t)*inv) * attn
				s := math.Sin(float64(pos+t)*inv) * attn
				a, b := float64(x[o+i]), float64(x[o+i+R/2])
				out[o+i] = a*c - b*s
				out[o+i+R/2] = b*c + a*s
			}
		}
	}
	return out
}

// TestLongRopeMatchesHF builds the graph rope of a longrope config
// (original context 64, max 256, so attention factor sqrt(1+ln4/ln64))
// and runs it through the interpreter at positions 0..255 for built
// contexts 64 (short factors), 65 and 256 (long), against hfLongRope
// within 1e-5 relative; the two factor sets must give different rotations.
func TestLongRopeMatchesHF(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	m, short, long := longRopeFixture(t, r, 64)
	c, err := phi3ConfigHF(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	attn := math.Sqrt(1 + math.Log(256.0/64)/math.Log(64))
	const heads, T = 4, 3
	E, R := c.HeadDim, c.rotDim()
	table := make([]float32, 8*heads*E)
	for i := range table {
		table[i] = float32(r.NormFloat64())
	}
	ids := []int{3, 0, 7}
	outs := map[int][]float32{}
	for _, tc := range []struct {
		ctx  int
		ext  []float64
		name string
	}{{64, short, "short"}, {65, long, "long"}, {256, long, "long"}, {0, long, "long (trained context)"}} {
		c.RopeContext = tc.ctx
		ro, err := ropeOf(&c)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(ro.Scale-attn) > 1e-12 {
			t.Fatalf("rope scale %v, want %v", ro.Scale, attn)
		}
		g := graph.New()
		y := g.RoPE(g.Embed(g.Tokens(), "emb", 8, heads*E), ro)
		g.SetOutput(y)
		in, err := graph.NewInterpreter(g, graph.Weights{"emb": table}, 1)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, 0, T*heads*E)
		for _, id := range ids {
			x = append(x, table[id*heads*E:(id+1)*heads*E]...)
		}
		for _, pos := range []int{0, 5, 63, 64, 100, 253} {
			st := in.NewState(256)
			st.Pos = pos
			got, _, err := in.Run(st, ids)
			if err != nil {
				t.Fatal(err)
			}
			want := hfLongRope(x, T, heads, E, R, pos, c.RopeTheta, tc.ext, attn)
			for i, w := range want {
				if d := math.Abs(float64(got[i]) - w); d > 1e-5*(1+math.Abs(w)) {
					t.Fatalf("context %d (%s) position %d: index %d got %v want %v", tc.ctx, tc.name, pos, i, got[i], w)
				}
			}
			if pos == 100 {
				outs[tc.ctx] = got
			}
		}
	}
	var d float64
	for i := range outs[64] {
		d = math.Max(d, math.Abs(float64(outs[64][i]-outs[65][i])))
	}
	if d < 0.1 {
		t.Errorf("short and long factors differ by only %.3g at position 100", d)
	}
}

func TestLongRopeChoiceAndMagnitude(t *testing.T) {
	c := Config{Context: 256, RopeScaling: RopeScaling{Type: "longrope", OriginalMaxPosition: 64}}
	for ctx, want := range map[int]bool{0: true, 1: false, 64: false, 65: true, 4096: true} {
		c.RopeContext = ctx
		if got := c.LongRopeFactors(); got != want {
			t.Errorf("rope context %d: long factors %v, want %v", ctx, got, want)
		}
	}
	for _, tc := range []struct {
		ctx, orig    int
		factor, attn float64
		want         float64
	}{
		{256, 64, 0, 0, math.Sqrt(1 + math.Log(4)/math.Log(64))},
		{131072, 4096, 0, 0, math.Sqrt(1 + math.Log(32)/math.Log(4096))}, // Phi-3-mini-128k
		{256, 256, 0, 0, 1},
		{256, 512, 0, 0, 1},
		{256, 64, 2, 0, math.Sqrt(1 + math.Log(2)/math.Log(64))},
		{256, 64, 0, 1.5, 1.5},
	} {
		c := Config{Context: tc.ctx, RopeScaling: RopeScaling{Type: "longrope", OriginalMaxPosition: tc.orig,
			Factor: tc.factor, AttentionFactor: tc.attn}}
		if got := ropeMagnitude(&c); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%+v: magnitude %v, want %v", tc, got, tc.want)
		}
	}
}

// TestLongRopeHFErrors feeds malformed longrope blocks and checks the
// error names the config.json field.
func TestLongRopeHFErrors(t *testing.T) {
	cases := []struct {
		name, field string
		mut         func(m, rs map[string]any)
	}{
		{"short count", "rope_scaling.short_factor", func(m, rs map[string]any) {
			rs["short_factor"] = rs["short_factor"].([]any)[:8]
		}},
		{"long count", "rope_scaling.long_factor", func(m, rs map[string]any) {
			rs["long_factor"] = append(rs["long_factor"].([]any), 1.0)
		}},
		{"negative factor", "rope_scaling.long_factor[2]", func(m, rs map[string]any) { rs["long_factor"].([]any)[2] = -1.0 }},
		{"zero factor", "rope_scaling.short_factor[0]", func(m, rs map[string]any) { rs["short_factor"].([]any)[0] = 0.0 }},
		{"string factor", "rope_scaling.short_factor[1]", func(m, rs map[string]any) { rs["short_factor"].([]any)[1] = "x" }},
		{"not a list", "rope_scaling.long_factor", func(m, rs map[string]any) { rs["long_factor"] = 2.0 }},
		{"missing", "rope_scaling.short_factor", func(m, rs map[string]any) { delete(rs, "short_factor") }},
		{"no original", "original_max_position_embeddings", func(m, rs map[string]any) {
			delete(m, "original_max_position_embeddings")
		}},
		{"zero original", "original_max_position_embeddings", func(m, rs map[string]any) {
			m["original_max_position_embeddings"] = 0.0
		}},
		{"attention factor", "rope_scaling.attention_factor", func(m, rs map[string]any) { rs["attention_factor"] = -1.0 }},
		{"factor", "rope_scaling.factor", func(m, rs map[string]any) { rs["factor"] = "big" }},
	}
	for _, tc := range cases {
		m, _, _ := longRopeFixture(t, rand.New(rand.NewPCG(1, 2)), 64)
		tc.mut(m, m["rope_scaling"].(map[string]any))
		_, err := phi3ConfigHF(m)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.field)
		}
	}
	// the old name "su" and rope_type are accepted; original in rope_scaling wins
	m, _, _ := longRopeFixture(t, rand.New(rand.NewPCG(1, 2)), 64)
	rs := m["rope_scaling"].(map[string]any)
	delete(rs, "type")
	rs["rope_type"], rs["original_max_position_embeddings"] = "su", 32.0
	c, err := phi3ConfigHF(m)
	if err != nil || c.RopeScaling.Type != "longrope" || c.RopeScaling.OriginalMaxPosition != 32 {
		t.Errorf("su: %+v, %v", c.RopeScaling, err)
	}
	// Validate refuses a config whose factors do not fit the rotary size
	c.RotaryDim = 12
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "rope_scaling.short_factor") {
		t.Errorf("rotary 12 with 9 factors: %v", err)
	}
}

// extraGGUF adds metadata and float32 tensors to a checkpoint.
type extraGGUF struct {
	format.Checkpoint
	meta    map[string]any
	tensors map[string][]float32
}

func (e *extraGGUF) Metadata() map[string]any {
	m := map[string]any{}
	for k, v := range e.Checkpoint.Metadata() {
		m[k] = v
	}
	for k, v := range e.meta {
		m[k] = v
	}
	return m
}

func (e *extraGGUF) Tensors() []format.TensorInfo {
	ts := append([]format.TensorInfo(nil), e.Checkpoint.Tensors()...)
	for name, v := range e.tensors {
		ts = append(ts, format.TensorInfo{Name: name, Shape: []int64{int64(len(v))}})
	}
	return ts
}

func (e *extraGGUF) ReadFloat32(name string) ([]float32, error) {
	if v, ok := e.tensors[name]; ok {
		return v, nil
	}
	return e.Checkpoint.ReadFloat32(name)
}

// TestLongRopeGGUF adds llama.cpp's longrope metadata and factor tensors
// to the phi3 fixture's GGUF and checks the config and rope they give.
func TestLongRopeGGUF(t *testing.T) {
	ck, err := detect.Open(testutil.Path(t, "arch/phi3/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	long, short := make([]float32, 9), make([]float32, 9)
	for i := range long {
		long[i], short[i] = float32(1+i), 1+float32(i)/8
	}
	e := &extraGGUF{Checkpoint: ck,
		meta:    map[string]any{"phi3.rope.scaling.attn_factor": 1.25, "phi3.rope.scaling.original_context_length": uint64(64)},
		tensors: map[string][]float32{"rope_factors_long.weight": long, "rope_factors_short.weight": short}}
	c, _, err := ConfigOf(e)
	if err != nil {
		t.Fatal(err)
	}
	s := c.RopeScaling
	if s.Type != "longrope" || s.AttentionFactor != 1.25 || s.OriginalMaxPosition != 64 ||
		len(s.LongFactor) != 9 || s.LongFactor[8] != 9 || s.ShortFactor[8] != 2 {
		t.Fatalf("rope scaling %+v", s)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for ctx, ext := range map[int][]float32{64: short, 256: long} {
		c.RopeContext = ctx
		ro, err := ropeOf(&c)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range ro.InvFreq {
			want := 1 / (float64(ext[i]) * math.Pow(c.RopeTheta, float64(2*i)/18))
			if math.Abs(f-want) > 1e-12*want {
				t.Fatalf("context %d: frequency %d is %v, want %v", ctx, i, f, want)
			}
		}
		if ro.Scale != 1.25 {
			t.Errorf("scale %v, want 1.25", ro.Scale)
		}
	}
	// metadata asking for longrope without the factor tensors is refused
	delete(e.tensors, "rope_factors_long.weight")
	if _, _, err := ConfigOf(e); err == nil || !strings.Contains(err.Error(), "rope_factors_long.weight") {
		t.Errorf("missing long factors: %v", err)
	}
	e.tensors["rope_factors_long.weight"] = long[:8]
	if c, _, err = ConfigOf(e); err == nil {
		err = c.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "rope_scaling.long_factor") {
		t.Errorf("8 long factors: %v", err)
	}
	e.meta["phi3.rope.scaling.attn_factor"] = -1.0
	if _, _, err := ConfigOf(e); err == nil || !strings.Contains(err.Error(), "attn_factor") {
		t.Errorf("negative attn_factor: %v", err)
	}
}

// FuzzLongRopeConfig parses config.json texts with a rope_scaling block;
// seeds are the phi3 fixture with a longrope block and hostile variants.
// Parsing, validation and building the rope must never panic.
func FuzzLongRopeConfig(f *testing.F) {
	m, _, _ := longRopeFixture(f, rand.New(rand.NewPCG(5, 5)), 64)
	b, err := json.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(strings.Replace(string(b), `"short_factor":[`, `"short_factor":[-1e308,`, 1)))
	f.Add([]byte(strings.Replace(string(b), `"original_max_position_embeddings":64`, `"original_max_position_embeddings":1e300`, 1)))
	f.Add([]byte(`{"hidden_size":96,"intermediate_size":1,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":3,` +
		`"rope_scaling":{"type":"longrope","short_factor":[],"long_factor":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		c, err := phi3ConfigHF(m)
		if err != nil || c.Validate() != nil {
			return
		}
		if _, err := ropeOf(&c); err != nil {
			t.Fatalf("valid config %+v: rope: %v", c.RopeScaling, err)
		}
	})
}

// TestDynamicRope: dynamic NTK scaling leaves the frequencies unchanged
// for a graph within the original context, and beyond it uses the base
// theta*(f*n/o - (f-1))^(R/(R-2)) (Hugging Face's rule for a sequence of
// n positions); a factor below 1 is refused, and config.json's "dynamic"
// type parses.
func TestDynamicRope(t *testing.T) {
	c := Config{HeadDim: 16, RopeTheta: 10000, Context: 512,
		RopeScaling: RopeScaling{Type: "dynamic", Factor: 4, OriginalMaxPosition: 128}}
	plain := c
	plain.RopeScaling = RopeScaling{}
	want, _ := ropeFreqs(&plain)
	for _, n := range []int{1, 64, 128} {
		c.RopeContext = n
		got, err := ropeFreqs(&c)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("context %d: %v (%v), want the unscaled %v", n, got, err, want)
		}
	}
	c.RopeContext = 512
	got, err := ropeFreqs(&c)
	if err != nil {
		t.Fatal(err)
	}
	base := 10000 * math.Pow(4.0*512/128-3, 16.0/14)
	for i, f := range got {
		w := math.Pow(base, -float64(2*i)/16)
		if math.Abs(f-w) > 1e-12*w {
			t.Fatalf("pair %d: %v, want %v", i, f, w)
		}
	}
	if got[1] >= want[1] {
		t.Fatalf("scaled frequency %v not below %v", got[1], want[1])
	}
	c.RopeScaling.Factor = 0.5
	if _, err := ropeFreqs(&c); err == nil || !strings.Contains(err.Error(), "dynamic") {
		t.Fatalf("factor 0.5: %v", err)
	}
	if s, err := ropeScalingHF(map[string]any{"type": "dynamic", "factor": 2.0}); err != nil || s.Type != "dynamic" || s.Factor != 2 {
		t.Fatalf("config.json dynamic: %+v %v", s, err)
	}
}
