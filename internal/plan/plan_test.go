package plan

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// handPlan is a small valid plan for passes of 4 rows: embed, norm, a
// rope + attention block, last row, classifier.
func handPlan() *Plan {
	return &Plan{
		Version: Version, Rows: 4, Arena: 4*8*3 + 8 + 16,
		Buffers: []Buffer{
			{Rows: 4, Cols: 8, Offset: 0},  // 0 embed
			{Rows: 4, Cols: 8, Offset: 32}, // 1 norm
			{Rows: 4, Cols: 8, Offset: 64}, // 2 rope
			{Rows: 4, Cols: 8, Offset: 0},  // 3 attention (reuses 0)
			{Rows: 1, Cols: 8, Offset: 96}, // 4 last row
			{Rows: 1, Cols: 16, Offset: 0}, // 5 logits
		},
		Steps: []Step{
			{Op: op.Embed, Out: 0, Weights: []string{"emb"}},
			{Op: op.RMSNorm, In: []int{0}, Out: 1, Weights: []string{"norm"}, Eps: 1e-5},
			{Op: op.RoPE, In: []int{1}, Out: 2, Rope: &Rope{HeadDim: 4, RotDim: 4, InvFreq: []float64{1, 0.01}}},
			{Op: op.Attention, In: []int{2, 1, 1}, Out: 3, Attn: &Attn{Heads: 2, KVHeads: 2, HeadDim: 4, Scale: 0.5}},
			{Op: op.SelectRows, In: []int{3}, Out: 4},
			{Op: op.Linear, In: []int{4}, Out: 5, Weights: []string{"emb"}},
		},
		Output: 5,
		KV:     KV{Layers: 1, Cols: 8, Ctx: 16},
	}
}

func handShapes(name string) ([]int64, bool) {
	switch name {
	case "emb":
		return []int64{16, 8}, true
	case "norm":
		return []int64{8}, true
	}
	return nil, false
}

// addCols appends a gather_cols or zero_cols step of the last row into a
// new buffer of cols columns.
func addCols(p *Plan, o op.Op, cols int, idx ...int) {
	p.Arena = 120 + max(cols, 0)
	p.Buffers = append(p.Buffers, Buffer{Rows: 1, Cols: cols, Offset: 120})
	p.Steps = append(p.Steps, Step{Op: o, In: []int{4}, Out: 6, Index: idx})
}

// TestColumnStepsValid checks that well-formed gather_cols and zero_cols
// steps pass.
func TestColumnStepsValid(t *testing.T) {
	for _, c := range []struct {
		o    op.Op
		cols int
	}{{op.GatherCols, 3}, {op.ZeroCols, 8}} {
		p := handPlan()
		addCols(p, c.o, c.cols, 0, 4, 7)
		if err := p.Validate(); err != nil {
			t.Fatalf("%v: %v", c.o, err)
		}
	}
}

func TestHandPlanValid(t *testing.T) {
	p := handPlan()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckWeights(handShapes); err != nil {
		t.Fatal(err)
	}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := q.Encode()
	if string(b) != string(b2) {
		t.Fatalf("round trip changed the plan:\n%s\n%s", b, b2)
	}
	if !strings.Contains(string(b), `"op":"rms_norm"`) {
		t.Fatalf("ops are not encoded by name: %s", b)
	}
}

// TestValidateRefuses breaks the hand plan one way at a time and checks
// that the error names the broken field.
func TestValidateRefuses(t *testing.T) {
	cases := []struct {
		name  string
		field string
		mut   func(p *Plan)
	}{
		{"version", "version", func(p *Plan) { p.Version = 9 }},
		{"zero rows", "rows", func(p *Plan) { p.Rows = 0 }},
		{"arena overflow", "buffers[2].offset", func(p *Plan) { p.Buffers[2].Offset = p.Arena - 4 }},
		{"negative offset", "buffers[1].offset", func(p *Plan) { p.Buffers[1].Offset = -1 }},
		{"huge cols", "buffers[5].cols", func(p *Plan) { p.Buffers[5].Cols = 1 << 40 }},
		{"overflowing buffer", "buffers[0].offset", func(p *Plan) { p.Buffers[0].Cols = MaxCols; p.Buffers[0].Offset = MaxArena }},
		{"huge arena", "arena", func(p *Plan) { p.Arena = 1 << 40 }},
		{"rows beyond pass", "buffers[0].rows", func(p *Plan) { p.Buffers[0].Rows = 5 }},
		{"output id", "output", func(p *Plan) { p.Output = 6 }},
		{"negative output", "output", func(p *Plan) { p.Output = -1 }},
		{"input id", "steps[1].in[0]", func(p *Plan) { p.Steps[1].In[0] = 99 }},
		{"negative input", "steps[1].in[0]", func(p *Plan) { p.Steps[1].In[0] = -3 }},
		{"out id", "steps[1].out", func(p *Plan) { p.Steps[1].Out = 42 }},
		{"unknown op", "steps[2].op", func(p *Plan) { p.Steps[2].Op = op.Op(200) }},
		{"invalid op", "steps[0].op", func(p *Plan) { p.Steps[0].Op = op.Invalid }},
		{"read before write", "steps[1].in[0]", func(p *Plan) { p.Steps[1].In[0] = 2 }},
		{"written twice", "steps[2].out", func(p *Plan) { p.Steps[2].Out = 1 }},
		{"input overlaps output", "steps[1].in[0]", func(p *Plan) { p.Buffers[1].Offset = 16 }},
		{"input clobbered", "steps[3].in[1]", func(p *Plan) {
			p.Arena = 200
			p.Buffers[1].Offset, p.Buffers[2].Offset, p.Buffers[3].Offset = 96, 16, 128
			p.Steps[3].In = []int{2, 0, 0}
		}},
		{"output clobbered", "output", func(p *Plan) {
			p.Steps = append(p.Steps, Step{Op: op.SiLU, In: []int{4}, Out: 6})
			p.Buffers = append(p.Buffers, Buffer{Rows: 1, Cols: 8, Offset: 0})
		}},
		{"arity", "steps[4].in", func(p *Plan) { p.Steps[4].In = []int{3, 3} }},
		{"weights", "steps[0].weights", func(p *Plan) { p.Steps[0].Weights = nil }},
		{"empty weight", "steps[1].weights[0]", func(p *Plan) { p.Steps[1].Weights[0] = "" }},
		{"rope missing", "steps[2].rope", func(p *Plan) { p.Steps[2].Rope = nil }},
		{"rope freqs", "steps[2].rope.inv_freq", func(p *Plan) { p.Steps[2].Rope.InvFreq = []float64{1} }},
		{"rope head", "steps[2].rope.head_dim", func(p *Plan) { p.Steps[2].Rope.HeadDim = 3 }},
		{"rope rot", "steps[2].rope.rot_dim", func(p *Plan) { p.Steps[2].Rope.RotDim = 6 }},
		{"rope scale negative", "steps[2].rope.scale", func(p *Plan) { p.Steps[2].Rope.Scale = -1 }},
		{"rope scale nan", "steps[2].rope.scale", func(p *Plan) { p.Steps[2].Rope.Scale = math.NaN() }},
		{"rope scale inf", "steps[2].rope.scale", func(p *Plan) { p.Steps[2].Rope.Scale = math.Inf(1) }},
		{"rope sections sum", "steps[2].rope.sections", func(p *Plan) { p.Steps[2].Rope.Sections = []int{1, 2, 3} }},
		{"rope sections zero", "steps[2].rope.sections", func(p *Plan) { p.Steps[2].Rope.Sections = []int{0, 1} }},
		{"attn layer", "steps[3].attn.layer", func(p *Plan) { p.Steps[3].Attn.Layer = 1 }},
		{"attn heads", "steps[3].attn.heads", func(p *Plan) { p.Steps[3].Attn.KVHeads = 3 }},
		{"attn tile on causal attention", "steps[3].attn.tile", func(p *Plan) { p.Steps[3].Attn.Tile = 4 }},
		{"attn negative tile", "steps[3].attn.tile", func(p *Plan) { p.Steps[3].Attn.Bidirectional, p.Steps[3].Attn.Tile = true, -1 }},
		{"attn cols", "steps[3].in", func(p *Plan) { p.Steps[3].Attn.HeadDim = 2 }},
		{"attn cache cols", "steps[3].attn", func(p *Plan) { p.KV.Cols = 4 }},
		{"kv ctx", "kv.ctx", func(p *Plan) { p.KV.Ctx = 0 }},
		{"kv size", "kv", func(p *Plan) { p.KV.Ctx = MaxCtx; p.KV.Cols = MaxCols }},
		{"last row shape", "steps[4].out", func(p *Plan) { p.Buffers[4].Cols = 7 }},
		{"linear rows", "steps[5].out", func(p *Plan) { p.Arena = 400; p.Buffers[5] = Buffer{Rows: 2, Cols: 16, Offset: 200} }},
		{"no steps", "steps", func(p *Plan) { p.Steps = nil }},
		{"arena larger than its buffers", "arena", func(p *Plan) { p.Arena = 1000 }},
		{"unwritten buffer", "buffers[6]", func(p *Plan) { p.Buffers = append(p.Buffers, Buffer{Rows: 1, Cols: 8, Offset: 0}) }},
		{"unused cache layer", "kv.layers", func(p *Plan) { p.KV.Layers = 2 }},
		{"cache wider than attention", "kv.cols", func(p *Plan) { p.KV.Cols = 16 }},
		{"gather unsorted", "steps[6].index", func(p *Plan) { addCols(p, op.GatherCols, 2, 3, 1) }},
		{"gather out of range", "steps[6].index", func(p *Plan) { addCols(p, op.GatherCols, 2, 1, 8) }},
		{"gather repeated", "steps[6].index", func(p *Plan) { addCols(p, op.GatherCols, 2, 1, 1) }},
		{"gather width", "steps[6].out", func(p *Plan) { addCols(p, op.GatherCols, 3, 1, 2) }},
		{"gather none", "steps[6].out", func(p *Plan) { addCols(p, op.GatherCols, 2) }},
		{"zero width", "steps[6].out", func(p *Plan) { addCols(p, op.ZeroCols, 2, 1, 2) }},
		{"zero negative", "steps[6].index", func(p *Plan) { addCols(p, op.ZeroCols, 8, -1, 2) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := handPlan()
			c.mut(p)
			err := p.Validate()
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a *plan.Error", err)
			}
			if pe.Field != c.field {
				t.Fatalf("error %q names field %q, want %q", err, pe.Field, c.field)
			}
		})
	}
}

func TestCheckWeightsRefuses(t *testing.T) {
	for _, c := range []struct {
		name, field string
		shapes      map[string][]int64
	}{
		{"missing", "steps[0].weights[0]", map[string][]int64{"norm": {8}}},
		{"embed cols", "steps[0].weights[0]", map[string][]int64{"emb": {16, 7}, "norm": {8}}},
		{"norm size", "steps[1].weights[0]", map[string][]int64{"emb": {16, 8}, "norm": {9}}},
		{"linear rank", "steps[0].weights[0]", map[string][]int64{"emb": {128}, "norm": {8}}},
	} {
		err := handPlan().CheckWeights(func(n string) ([]int64, bool) { s, ok := c.shapes[n]; return s, ok })
		var pe *Error
		if !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("%s: got %v, want an error naming %s", c.name, err, c.field)
		}
	}
}

func TestDecodeRefusesUnknownOp(t *testing.T) {
	b, _ := handPlan().Encode()
	bad := strings.Replace(string(b), `"op":"silu"`, `"op":"silu"`, 1)
	bad = strings.Replace(bad, `"op":"rms_norm"`, `"op":"softmax"`, 1)
	if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "softmax") {
		t.Fatalf("got %v, want an error naming the unknown op", err)
	}
	if _, err := Decode([]byte(`{"version":1,"rows":4`)); err == nil {
		t.Fatal("truncated plan accepted")
	}
}

func TestManifestValidate(t *testing.T) {
	good := func() *Manifest {
		return &Manifest{Format: ManifestFormat, Architecture: "llama", BOS: 1, EOS: []int{2}, Vocab: 16, Ctx: 32,
			Plans: []PlanRef{{ARLen: 1, Blob: BlobName(1)}, {ARLen: 4, Blob: BlobName(4)}}, Weights: "f32"}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for field, mut := range map[string]func(m *Manifest){
		"manifest.format":          func(m *Manifest) { m.Format = "x" },
		"manifest.vocab":           func(m *Manifest) { m.Vocab = 0 },
		"manifest.ctx":             func(m *Manifest) { m.Ctx = -1 },
		"manifest.bos":             func(m *Manifest) { m.BOS = 16 },
		"manifest.eos[0]":          func(m *Manifest) { m.EOS[0] = -2 },
		"manifest.plans":           func(m *Manifest) { m.Plans = m.Plans[1:] },
		"manifest.plans[1].ar_len": func(m *Manifest) { m.Plans[1].ARLen = 1 },
		"manifest.plans[0].blob":   func(m *Manifest) { m.Plans[0].Blob = "" },
		"manifest.plans[0].ar_len": func(m *Manifest) { m.Plans[0].ARLen = 64 },
	} {
		m := good()
		mut(m)
		var pe *Error
		if err := m.Validate(); !errors.As(err, &pe) || pe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	b, _ := handPlan().Encode()
	f.Add(b)
	hb, _ := headNormPlan().Encode()
	f.Add(hb)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"rows":1,"arena":1,"buffers":[{"rows":1,"cols":1,"offset":0}],"steps":[{"op":"embed","out":0,"weights":["w"]}],"output":0,"kv":{"ctx":1}}`))
	f.Add([]byte(`{"version":1,"rows":65536,"arena":2147483647,"buffers":[{"rows":65536,"cols":16777216,"offset":9223372036854775807}]}`))
	f.Add([]byte(`{"version":1,"steps":[{"op":"attention","in":[0,0,0],"out":0,"attn":{"heads":-1}}]}`))
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		// a valid plan must survive weight checks and re-encoding
		_ = p.CheckWeights(func(string) ([]int64, bool) { return []int64{1, 1}, true })
		if _, err := p.Encode(); err != nil {
			t.Fatalf("valid plan does not encode: %v", err)
		}
	})
}

// TestHiddenValidate checks the hidden rows a plan keeps: a buffer of the
// pass's rows, apart from the output, that no later step overwrites.
func TestHiddenValidate(t *testing.T) {
	at := func(b int) *int { return &b }
	p := handPlan()
	p.Hidden = at(1)
	if err := p.Validate(); err != nil {
		t.Fatalf("buffer 1 as hidden rows: %v", err)
	}
	for name, h := range map[string]int{"missing": 9, "negative": -1, "the output": 5, "one row": 4, "overwritten": 3} {
		p := handPlan()
		p.Hidden = at(h)
		var pe *Error
		if err := p.Validate(); !errors.As(err, &pe) || pe.Field != "hidden" {
			t.Errorf("%s (buffer %d): got %v", name, h, err)
		}
	}
}

// TestManifestEmbedding checks the pooling of an embedding model.
func TestManifestEmbedding(t *testing.T) {
	m := &Manifest{Format: ManifestFormat, Architecture: "qwen3", BOS: 1, Vocab: 16, Ctx: 32,
		Plans: []PlanRef{{ARLen: 1, Blob: BlobName(1)}}, Weights: "f32", Embedding: &Embedding{Pooling: PoolLast}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	m.Embedding.Pooling = PoolRank
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	m.Embedding.Pooling = "max"
	var pe *Error
	if err := m.Validate(); !errors.As(err, &pe) || pe.Field != "manifest.embedding.pooling" {
		t.Errorf("pooling max: got %v", err)
	}
}

// TestManifestMTP checks the draft head's plan list.
func TestManifestMTP(t *testing.T) {
	good := func() *Manifest {
		return &Manifest{Format: ManifestFormat, Architecture: "qwen35", BOS: 1, Vocab: 16, Ctx: 32,
			Plans: []PlanRef{{ARLen: 1, Blob: BlobName(1)}}, Weights: "f32",
			MTP: &MTP{Plans: []PlanRef{{ARLen: 1, Blob: MTPBlobName(1)}, {ARLen: 4, Blob: MTPBlobName(4)}}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for field, mut := range map[string]func(m *Manifest){
		"manifest.mtp.plans":           func(m *Manifest) { m.MTP.Plans = m.MTP.Plans[1:] },
		"manifest.mtp.plans[1].ar_len": func(m *Manifest) { m.MTP.Plans[1].ARLen = 1 },
		"manifest.mtp.plans[0].blob":   func(m *Manifest) { m.MTP.Plans[0].Blob = "" },
		"manifest.mtp.plans[0].ar_len": func(m *Manifest) { m.MTP.Plans[0].ARLen = 64 },
	} {
		m := good()
		mut(m)
		var pe *Error
		if err := m.Validate(); !errors.As(err, &pe) || pe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}
