package quant

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPresets: every preset validates, survives a JSON round trip unchanged,
// and maps real tensor names (Hugging Face and GGUF spellings) as documented.
func TestPresets(t *testing.T) {
	want := []string{"f16", "lpbq4-h6", "lpbq4-h6-k8v8", "lpbq4-h6-v8", "lpbq5", "q4", "q4-hqq", "w4a16-lpbq", "w4a16-lpbq-b16", "w4a16-lpbq-b64", "w8a16"}
	if got := PresetNames(); !reflect.DeepEqual(got, want) {
		t.Fatalf("PresetNames = %v, want %v", got, want)
	}
	for _, name := range want {
		r, err := Preset(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Name != name {
			t.Errorf("%s: Name = %q", name, r.Name)
		}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseRecipe(data)
		if err != nil {
			t.Fatalf("%s: re-reading %s: %v", name, data, err)
		}
		if !sameRecipe(r, back) {
			t.Errorf("%s: round trip changed the recipe:\n%+v\n%+v", name, r, back)
		}
	}
	w8 := Scheme{Kind: KindW8}
	for _, tc := range []struct {
		preset, tensor string
		want           Scheme
	}{
		{"w4a16-lpbq", "model.layers.0.self_attn.q_proj.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"w4a16-lpbq-b16", "model.layers.0.mlp.up_proj.weight", Scheme{Kind: KindLPBQ, Block: 16, Mode: LPBQRefined}},
		{"w4a16-lpbq-b64", "blk.3.attn_q.weight", Scheme{Kind: KindLPBQ, Block: 64, Mode: LPBQRefined}},
		{"w4a16-lpbq", "lm_head.weight", w8},
		{"w4a16-lpbq", "output.weight", w8},
		{"w4a16-lpbq", "model.layers.11.self_attn.v_proj.weight", w8},
		{"w4a16-lpbq", "blk.11.attn_v.weight", w8},
		{"w4a16-lpbq", "model.layers.2.mlp.down_proj.weight", w8},
		{"w4a16-lpbq", "blk.2.ffn_down.weight", w8},
		{"w4a16-lpbq", "model.layers.2.mlp.down_proj.bias", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"w4a16-lpbq", "model.layers.2.self_attn.o_proj.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"q4", "model.layers.0.self_attn.v_proj.weight", Scheme{Kind: KindQ4, Block: 32, Sym: true}},
		{"q4", "lm_head.weight", w8},
		{"q4-hqq", "blk.0.ffn_gate.weight", Scheme{Kind: KindQ4, Block: 32, Sym: true, HQQ: true}},
		{"w8a16", "lm_head.weight", w8},
		{"f16", "model.layers.0.mlp.down_proj.weight", Scheme{Kind: KindF16}},
		{"lpbq4-h6", "model.layers.0.mlp.down_proj.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"lpbq4-h6", "blk.0.attn_v.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"lpbq4-h6", "model.embed_tokens.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"lpbq4-h6", "token_embd.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"lpbq4-h6", "lm_head.weight", Scheme{Kind: KindQ6K}},
		{"lpbq4-h6", "output.weight", Scheme{Kind: KindQ6K}},
		{"lpbq4-h6", "model.layers.0.linear_attn.out_proj.weight", Scheme{Kind: KindW8, FloatInput: true}},
		{"lpbq4-h6-k8v8", "model.layers.3.self_attn.k_proj.weight", w8},
		{"lpbq4-h6-k8v8", "blk.3.attn_k.weight", w8},
		{"lpbq4-h6-k8v8", "model.layers.3.self_attn.v_proj.weight", w8},
		{"lpbq4-h6-k8v8", "model.layers.3.self_attn.q_proj.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"lpbq4-h6-k8v8", "model.layers.3.mlp.down_proj.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"lpbq4-h6-v8", "blk.3.attn_v.weight", w8},
		{"lpbq4-h6-v8", "model.layers.3.self_attn.k_proj.weight", Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}},
		{"lpbq4-h6-v8", "lm_head.weight", Scheme{Kind: KindQ6K}},
		{"lpbq5", "model.layers.3.self_attn.v_proj.weight", Scheme{Kind: KindLPBQ5, Block: 32}},
		{"lpbq5", "lm_head.weight", Scheme{Kind: KindLPBQ5, Block: 32}},
		{"lpbq5", "model.embed_tokens.weight", Scheme{Kind: KindLPBQ5, Block: 32}},
		{"lpbq5", "model.layers.0.conv.in_proj.weight", w8},
	} {
		r, _ := Preset(tc.preset)
		if got := r.SchemeFor(tc.tensor); got != tc.want {
			t.Errorf("%s: SchemeFor(%q) = %v, want %v", tc.preset, tc.tensor, got, tc.want)
		}
	}
	lp, _ := Preset("w4a16-lpbq")
	if lp.KV != KVU8 || lp.Activations.DType != ActA16 {
		t.Errorf("w4a16-lpbq: kv %s, activations %s", lp.KV, lp.Activations.DType)
	}
	for _, name := range []string{"lpbq4-h6", "lpbq4-h6-v8", "lpbq4-h6-k8v8", "lpbq5"} {
		if r, _ := Preset(name); r.KV != KVF16 {
			t.Errorf("%s: kv %s, want f16 (llama.cpp's default cache)", name, r.KV)
		}
	}
	if _, err := Preset("w3"); !isField(err, "name") {
		t.Errorf("unknown preset: %v", err)
	}
}

// sameRecipe compares recipes ignoring compiled patterns.
func sameRecipe(a, b Recipe) bool {
	if a.Name != b.Name || a.Default != b.Default || a.Activations != b.Activations || a.KV != b.KV || a.Vision != b.Vision || len(a.Overrides) != len(b.Overrides) {
		return false
	}
	for i := range a.Overrides {
		if a.Overrides[i].Pattern != b.Overrides[i].Pattern || a.Overrides[i].Scheme != b.Overrides[i].Scheme {
			return false
		}
	}
	return true
}

func isField(err error, field string) bool {
	var re *RecipeError
	return errors.As(err, &re) && re.Field == field
}

// TestRecipeParse: defaults of omitted fields, glob and regexp patterns, and
// first match wins.
func TestRecipeParse(t *testing.T) {
	r, err := ParseRecipe([]byte(`{
		"name": "mixed",
		"default": {"scheme": "q4", "group": 64, "sym": false, "hqq": true},
		"overrides": [
			{"pattern": "model.layers.0.*", "scheme": "f16"},
			{"pattern": "re:\\.(q|k)_proj\\.", "scheme": "lpbq", "mode": "reference"},
			{"pattern": "*_proj.weight", "scheme": "w8"}
		],
		"activations": {"dtype": "int8-dynamic", "fake_quant": true}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.KV != KVF16 || r.Activations != (Activations{ActInt8Dynamic, true}) {
		t.Errorf("kv %q activations %+v", r.KV, r.Activations)
	}
	for name, want := range map[string]Scheme{
		"model.layers.0.self_attn.q_proj.weight": {Kind: KindF16},
		"model.layers.1.self_attn.q_proj.weight": {Kind: KindLPBQ, Block: 32, Mode: LPBQReference},
		"model.layers.1.self_attn.k_proj.weight": {Kind: KindLPBQ, Block: 32, Mode: LPBQReference},
		"model.layers.1.self_attn.v_proj.weight": {Kind: KindW8},
		"model.layers.1.mlp.gate.weight":         {Kind: KindQ4, Block: 64, HQQ: true},
	} {
		if got := r.SchemeFor(name); got != want {
			t.Errorf("SchemeFor(%q) = %v, want %v", name, got, want)
		}
	}
	// defaults of a minimal recipe
	r, err = ParseRecipe([]byte(`{"default": {"scheme": "lpbq"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Default != (Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}) || r.KV != KVF16 || r.Activations.DType != ActA16 {
		t.Errorf("defaults: %+v", r)
	}
	r, _ = ParseRecipe([]byte(`{"default": {"scheme": "q4", "block": 128}}`))
	if r.Default != (Scheme{Kind: KindQ4, Block: 128, Sym: true}) {
		t.Errorf("q4 defaults: %+v", r.Default)
	}
	if r.Vision.Weights != "" {
		t.Errorf("vision weights %q without a vision part", r.Vision.Weights)
	}
	// a 4-bit text model with a binary16 encoder, written back and read
	r, err = ParseRecipe([]byte(`{"default": {"scheme": "q4"}, "vision": {"weights": "f16"}}`))
	if err != nil || r.Vision.Weights != VisionF16 {
		t.Fatalf("vision f16: %v, %+v", err, r.Vision)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ParseRecipe(b); err != nil || back.Vision != r.Vision || !strings.Contains(string(b), `"vision":{"weights":"f16"}`) {
		t.Errorf("written back as %s: %v, %+v", b, err, back.Vision)
	}
}

// TestRecipeErrors: every bad recipe is refused with a *RecipeError that
// names the offending field.
func TestRecipeErrors(t *testing.T) {
	for _, tc := range []struct{ json, field, msg string }{
		{`{"default": {"scheme": "w3"}}`, "default.scheme", `unknown scheme "w3"`},
		{`{"default": {}}`, "default.scheme", "missing scheme"},
		{`{"name": "x"}`, "default", "missing default"},
		{`{"default": {"scheme": "lpbq", "block": 48}}`, "default.block", "not one of"},
		{`{"default": {"scheme": "q4", "group": 0}}`, "default.block", "not one of"},
		{`{"default": {"scheme": "w8", "block": 32}}`, "default.block", "takes no block"},
		{`{"default": {"scheme": "lpbq", "mode": "fast"}}`, "default.mode", `unknown lpbq mode "fast"`},
		{`{"default": {"scheme": "lpbq", "hqq": true}}`, "default.hqq", "q4 only"},
		{`{"default": {"scheme": "lpbq", "sym": false}}`, "default.sym", "always symmetric"},
		{`{"default": {"scheme": "f16", "sym": true}}`, "default.sym", "takes no sym"},
		{`{"default": {"scheme": "q4", "group": 32, "block": 32}}`, "default.group", "not both"},
		{`{"default": {"scheme": "lpbq", "group": 32}}`, "default.group", "takes no group"},
		{`{"default": {"scheme": "lpbq"}, "overrides": [{"scheme": "w8"}]}`, "overrides[0].pattern", "missing pattern"},
		{`{"default": {"scheme": "lpbq"}, "overrides": [{"pattern": "a", "scheme": "w8"}, {"pattern": "re:(", "scheme": "w8"}]}`, "overrides[1].pattern", "bad regular expression"},
		{`{"default": {"scheme": "lpbq"}, "overrides": [{"pattern": "[", "scheme": "w8"}]}`, "overrides[0].pattern", "bad glob"},
		{`{"default": {"scheme": "lpbq"}, "overrides": [{"pattern": "", "scheme": "w8"}]}`, "overrides[0].pattern", "empty"},
		{`{"default": {"scheme": "lpbq"}, "overrides": [{"pattern": "x", "scheme": "q4", "mode": "refined"}]}`, "overrides[0].mode", "lpbq only"},
		{`{"default": {"scheme": "lpbq"}, "kv": "u4"}`, "kv", `unknown kv type "u4"`},
		{`{"default": {"scheme": "lpbq"}, "activations": {"dtype": "a8"}}`, "activations.dtype", `"a8"`},
		{`{"default": {"scheme": "lpbq"}, "vision": {"weights": "q4"}}`, "vision.weights", `unknown vision weights "q4" (want f32, f16 or w8)`},
		{`{"default": {"scheme": "lpbq"}, "vision": {"weights": "F16"}}`, "vision.weights", `unknown vision weights "F16"`},
		{`{"default": {"scheme": "lpbq"}, "vision": {"scheme": "f16"}}`, "scheme", "unknown field"},
		{`{"default": {"scheme": "lpbq"}, "vision": {"weights": 16}}`, "vision.weights", "want a JSON string"},
		{`{"default": {"scheme": "lpbq"}, "colour": 1}`, "colour", "unknown field"},
		{`{"default": {"scheme": "lpbq"}, "calibration": {"gptq": true, "gptq_refit": -1}}`, "calibration.gptq_refit", "not in 0..100"},
		{`{"default": {"scheme": "lpbq"}, "calibration": {"gptq_refit": 2}}`, "calibration.gptq_refit", "needs"},
		{`{"default": {"scheme": "lpbq", "bits": 4}}`, "bits", "unknown field"},
		{`{"default": {"scheme": "lpbq", "block": "32"}}`, "default.block", "want a JSON number"},
		{`{"default": {"scheme": "lpbq", "block": 1e400}}`, "default.block", "want a JSON number"},
		{`{"default": {"scheme": "lpbq"}, "overrides": {"pattern": "x"}}`, "overrides", "want a JSON array"},
		{`[1, 2]`, "(top level)", "want a JSON object"},
		{`{"default": {"scheme": "lpbq"}} {}`, "", "trailing data"},
		{`{"default": {"scheme": "lpbq"`, "", "truncated"},
		{``, "", "truncated"},
		{`{"default": {"scheme": lpbq}}`, "", "invalid JSON at byte"},
	} {
		_, err := ParseRecipe([]byte(tc.json))
		var re *RecipeError
		if !errors.As(err, &re) {
			t.Errorf("%s: err = %v, want *RecipeError", tc.json, err)
			continue
		}
		if re.Field != tc.field || !strings.Contains(re.Msg, tc.msg) {
			t.Errorf("%s: field %q msg %q, want field %q msg containing %q", tc.json, re.Field, re.Msg, tc.field, tc.msg)
		}
	}
}

func TestLoadRecipe(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	lp, _ := Preset("w4a16-lpbq-b64")
	data, _ := json.MarshalIndent(lp, "", "  ")
	if err := os.WriteFile(good, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRecipe(good)
	if err != nil || !sameRecipe(r, lp) {
		t.Fatalf("LoadRecipe: %v %+v", err, r)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"default": {"scheme": "lpbq", "block": 8}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadRecipe(bad)
	var re *RecipeError
	if !errors.As(err, &re) || re.File != bad || re.Field != "default.block" || !strings.Contains(err.Error(), "bad.json: default.block:") {
		t.Errorf("bad recipe: %v", err)
	}
	if _, err := LoadRecipe(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxRecipeSize+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRecipe(big); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("oversized file: %v", err)
	}
}

func TestSchemeValidateAndQuantize(t *testing.T) {
	w := gaussian(71, 8*64, 1)
	for _, s := range []Scheme{
		{Kind: KindLPBQ, Block: 16}, {Kind: KindLPBQ, Block: 64, Mode: LPBQReference},
		{Kind: KindW8}, {Kind: KindQ4, Block: 32, Sym: true, HQQ: true}, {Kind: KindQ4, Block: 64}, {Kind: KindF16},
	} {
		q, err := Quantize(w, 8, 64, s)
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		if q.Scheme.Kind != s.Kind || q.Scheme.Block != s.Block {
			t.Errorf("%v: result scheme %v", s, q.Scheme)
		}
		st, _ := q.Error(w)
		t.Logf("%-22v %.3f bits/weight  %v", s, q.BitsPerWeight(), st)
	}
	if _, err := Quantize(w, 8, 64, Scheme{Kind: KindLPBQ, Block: 8}); !strings.Contains(err.Error(), "block size 8") {
		t.Errorf("block 8: %v", err)
	}
	if _, err := Quantize(w, 8, 64, Scheme{Kind: "q3"}); !strings.Contains(err.Error(), `unknown scheme "q3"`) {
		t.Errorf("q3: %v", err)
	}
}
