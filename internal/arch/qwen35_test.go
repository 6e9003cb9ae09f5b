package arch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestQwen35Fixture runs the interpreter over the qwen35 fixture from the
// HF folder and from llama.cpp's GGUF, and compares the logits at every
// position with llama.cpp's (tolerance 1e-3, the fixture README's), then
// checks that the prompt fed in two calls (split_prefill) gives the same
// logits as one.
func TestQwen35Fixture(t *testing.T) {
	for _, gguf := range []bool{false, true} {
		d := fixtureDiff(t, "qwen35", gguf, nil)
		t.Logf("gguf %v: max |logit diff| %.3g", gguf, d)
		if d > 1e-3 {
			t.Errorf("gguf %v: logits differ from llama.cpp by %.3g (tolerance 1e-3)", gguf, d)
		}
	}
}

// TestQwen35HFMatchesGGUF checks that the HF folder, converted on read
// (gains 1 + w, A = -exp(A_log), value heads tiled), holds the GGUF's
// values in every weight of the graph, and that partial RoPE matters.
func TestQwen35HFMatchesGGUF(t *testing.T) {
	load := func(rel string) *Model {
		ck, err := detect.Open(testutil.Path(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ck.Close() })
		m, err := Load(ck)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	hf, gg := load("arch/qwen35"), load("arch/qwen35/model.gguf")
	if len(hf.Weights) != len(gg.Weights) {
		t.Fatalf("%d weights from HF, %d from GGUF", len(hf.Weights), len(gg.Weights))
	}
	for name, a := range hf.Weights {
		b := gg.Weights[name]
		if len(a) != len(b) {
			t.Fatalf("%s: %d values from HF, %d from GGUF", name, len(a), len(b))
		}
		var d float64 // relative to the value: -exp(A_log) may round either way
		for i := range a {
			d = math.Max(d, math.Abs(float64(a[i]-b[i]))/math.Max(1, math.Abs(float64(b[i]))))
		}
		if d > 1e-6 {
			t.Errorf("%s: HF and GGUF values differ by %.3g (relative)", name, d)
		}
	}
	if d := fixtureDiff(t, "qwen35", true, func(c *Config) { c.RotaryDim = c.HeadDim }); d < 0.01 {
		t.Errorf("full rotation moves the logits by only %.3g", d)
	}
}

// TestQwen35SplitPrefill feeds the fixture's prompt to the interpreter in
// two calls at split_prefill.k and checks every row against one call.
func TestQwen35SplitPrefill(t *testing.T) {
	var ref struct {
		Tokens []int `json:"tokens"`
		Split  struct {
			K int `json:"k"`
		} `json:"split_prefill"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen35/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	ck, err := detect.Open(testutil.Path(t, "arch/qwen35"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(&m.Config, BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, m.Weights, 1)
	if err != nil {
		t.Fatal(err)
	}
	one, _, err := in.Run(in.NewState(64), ref.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	st := in.NewState(64)
	a, _, err := in.Run(st, ref.Tokens[:ref.Split.K])
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := in.Run(st, ref.Tokens[ref.Split.K:])
	if err != nil {
		t.Fatal(err)
	}
	two := append(a, b...)
	var d float64
	for i := range one {
		d = math.Max(d, math.Abs(float64(one[i]-two[i])))
	}
	if d > 1e-5 {
		t.Errorf("split prefill differs from one call by %.3g", d)
	}
}

func TestQwen35Config(t *testing.T) {
	c, err := qwen35ConfigHF(fixtureConfig(t, "qwen35"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := c.DeltaNet
	if c.RotaryDim != 8 || c.RopeTheta != 1e7 || c.HeadDim != 32 || !slices.Equal(d.FullLayers, []int{3, 7}) ||
		d.KeyHeads != 2 || d.ValueHeads != 4 || d.KeyDim != 16 || d.ValueDim != 16 || d.ConvKernel != 4 || !d.AttnGate || c.Tied {
		t.Errorf("config %+v, deltanet %+v", c, d)
	}
	for _, bad := range []struct {
		want string
		mut  func(m map[string]any)
	}{
		{"layer_types[2]", func(m map[string]any) { m["layer_types"].([]any)[2] = "sliding_attention" }},
		{"layer_types", func(m map[string]any) { m["layer_types"] = []any{"full_attention"} }},
		{"linear_num_key_heads", func(m map[string]any) { delete(m, "linear_num_key_heads") }},
		{"rope_type", func(m map[string]any) { m["rope_parameters"].(map[string]any)["rope_type"] = "yarn" }},
		{"value heads", func(m map[string]any) { m["linear_num_value_heads"] = 3.0 }},
		{"attn_output_gate", func(m map[string]any) { m["attn_output_gate"] = "yes" }},
		{"partial_rotary_factor", func(m map[string]any) { m["rope_parameters"].(map[string]any)["partial_rotary_factor"] = 2.0 }},
	} {
		m := fixtureConfig(t, "qwen35")
		bad.mut(m)
		c, err := qwen35ConfigHF(m)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v", bad.want, err)
		}
	}
}

// TestQwen35MTP runs the draft head over the fixture as llama.cpp's MTP
// context does (row j: token j+1 and the target's hidden state at j, at
// position j+1), from the HF folder and the GGUF, and compares its logits
// with llama.cpp's (reference.json mtp, the last 16 rows, 1e-3) and its
// argmax at every row.
func TestQwen35MTP(t *testing.T) {
	var ref struct {
		Tokens []int `json:"tokens"`
		MTP    struct {
			Argmax   []int       `json:"mtp_argmax_all_rows"`
			From     int         `json:"mtp_logits_rows_from"`
			LastRows [][]float32 `json:"mtp_logits_last_rows"`
		} `json:"mtp"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen35/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	n := len(ref.Tokens)
	for _, rel := range []string{"arch/qwen35", "arch/qwen35/model.gguf"} {
		ck, err := detect.Open(testutil.Path(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		m, err := Load(ck)
		if err != nil {
			t.Fatal(err)
		}
		c := m.Config
		g, err := Build(&c, BuildOptions{AllLogits: true, Hidden: true})
		if err != nil {
			t.Fatal(err)
		}
		in, err := graph.NewInterpreter(g, m.Weights, 1)
		if err != nil {
			t.Fatal(err)
		}
		hidden, _, err := in.Run(in.NewState(n), ref.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		head, err := LoadMTP(ck, &c)
		if err != nil {
			t.Fatal(err)
		}
		hin, err := graph.NewInterpreter(head.Graph, head.Weights, 1)
		if err != nil {
			t.Fatal(err)
		}
		pos := make([]int, n-1)
		for j := range pos {
			pos[j] = j + 1
		}
		out, rows, err := hin.RunInput(hin.NewState(n), graph.Input{IDs: ref.Tokens[1:], Rows: hidden[:(n-1)*c.Hidden], Positions: pos})
		if err != nil {
			t.Fatal(err)
		}
		if rows != n-1 || len(ref.MTP.Argmax) != n-1 {
			t.Fatalf("%d draft rows, reference %d, want %d", rows, len(ref.MTP.Argmax), n-1)
		}
		var d float64
		agree := 0
		for j := 0; j < rows; j++ {
			row := out[j*c.Vocab : (j+1)*c.Vocab]
			best := 0
			for i, v := range row {
				if v > row[best] {
					best = i
				}
			}
			if best == ref.MTP.Argmax[j] {
				agree++
			}
			if j >= ref.MTP.From {
				for i, want := range ref.MTP.LastRows[j-ref.MTP.From] {
					d = math.Max(d, math.Abs(float64(row[i]-want)))
				}
			}
		}
		t.Logf("%s: draft logits max |diff| %.3g, argmax %d/%d", rel, d, agree, rows)
		if d > 1e-3 || agree != rows {
			t.Errorf("%s: draft logits differ by %.3g (tolerance 1e-3), argmax agrees on %d of %d rows", rel, d, agree, rows)
		}
	}
}

// TestQwen35MTPRefused checks that the draft head is refused, by name, for
// a config without an MTP block and for another family.
func TestQwen35MTPRefused(t *testing.T) {
	ck, err := detect.Open(testutil.Path(t, "arch/qwen35/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	c, _, err := ConfigOf(ck)
	if err != nil {
		t.Fatal(err)
	}
	none := c
	d := *c.DeltaNet
	d.MTPLayers = 0
	none.DeltaNet = &d
	if _, err := LoadMTP(ck, &none); err == nil || !strings.Contains(err.Error(), "no multi-token-prediction block") {
		t.Errorf("no MTP block: %v", err)
	}
	other := c
	other.Family = "qwen3"
	if _, err := LoadMTP(ck, &other); err == nil || !strings.Contains(err.Error(), "only qwen35") {
		t.Errorf("another family: %v", err)
	}
}

// TestQwen35ConfigGGUF reads the fixture GGUF's metadata (the MTP block
// counted in block_count, value head size from ssm.inner_size) and checks
// that broken metadata is refused naming the key.
func TestQwen35ConfigGGUF(t *testing.T) {
	ck, err := detect.Open(testutil.Path(t, "arch/qwen35/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	meta := ck.Metadata()
	c, err := qwen35ConfigGGUF(meta, "qwen35")
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = 384 // ConfigOf takes it from token_embd.weight
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := c.DeltaNet
	if c.Layers != 8 || d.MTPLayers != 1 || d.ValueDim != 16 || d.KeyDim != 16 || d.KeyHeads != 2 || d.ValueHeads != 4 ||
		!slices.Equal(d.FullLayers, []int{3, 7}) || c.RotaryDim != 8 {
		t.Errorf("config %+v, deltanet %+v", c, d)
	}
	for _, bad := range []struct {
		key  string
		val  any
		want string
	}{
		{"qwen35.ssm.group_count", nil, "qwen35.ssm.group_count"},
		{"qwen35.ssm.inner_size", int64(63), "inner_size"},
		{"qwen35.nextn_predict_layers", int64(9), "nextn_predict_layers"},
		{"qwen35.full_attention_interval", int64(0), "full_attention_interval"},
	} {
		m := map[string]any{}
		for k, v := range meta {
			m[k] = v
		}
		if bad.val == nil {
			delete(m, bad.key)
		} else {
			m[bad.key] = bad.val
		}
		c, err := qwen35ConfigGGUF(m, "qwen35")
		if err == nil {
			c.Vocab = 384
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s = %v: got %v", bad.key, bad.val, err)
		}
	}
}

// TestQwen35RopeKeysAtTop reads rope_theta and partial_rotary_factor from
// the top of config.json when rope_parameters lacks them.
func TestQwen35RopeKeysAtTop(t *testing.T) {
	m := fixtureConfig(t, "qwen35")
	delete(m, "rope_parameters")
	m["rope_theta"], m["partial_rotary_factor"] = 5e6, 0.5
	c, err := qwen35ConfigHF(m)
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 5e6 || c.RotaryDim != 16 {
		t.Errorf("rope theta %v, rotary size %d; want 5e6 and 16", c.RopeTheta, c.RotaryDim)
	}
}
