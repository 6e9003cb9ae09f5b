package arch

import (
	"strings"
	"testing"
)

// TestConfigValuesReadStrictly: wrong types and values the family does not
// compute are errors naming the field (each was read as a default before:
// gelu computed SiLU, "x" became 1e-6, "big" was dropped, ["a"] no EOS).
func TestConfigValuesReadStrictly(t *testing.T) {
	for _, c := range []struct {
		family, want string
		mut          func(m map[string]any)
	}{
		{"llama", `"hidden_act" is "gelu"`, func(m map[string]any) { m["hidden_act"] = "gelu" }},
		{"qwen3", `"hidden_act" is "relu"`, func(m map[string]any) { m["hidden_act"] = "relu" }},
		{"qwen2", `"hidden_act" is 3`, func(m map[string]any) { m["hidden_act"] = 3.0 }},
		{"llama", `"rms_norm_eps" is "x"`, func(m map[string]any) { m["rms_norm_eps"] = "x" }},
		{"qwen3", `"rope_theta" is true`, func(m map[string]any) { m["rope_theta"] = true }},
		{"llama", `"rope_scaling" is "big"`, func(m map[string]any) { m["rope_scaling"] = "big" }},
		{"smollm3", `"eos_token_id" is`, func(m map[string]any) { m["eos_token_id"] = []any{"a"} }},
		{"granite", `"bos_token_id" is -1`, func(m map[string]any) { m["bos_token_id"] = -1.0 }},
	} {
		m := fixtureConfig(t, c.family)
		f := familyNamed(t, c.family)
		cfg, err := f.configHF(m)
		if err != nil {
			t.Fatalf("%s fixture: %v", c.family, err)
		}
		if err := strictHF(m, &cfg); err != nil {
			t.Fatalf("%s fixture refused: %v", c.family, err)
		}
		c.mut(m)
		cfg, err = f.configHF(m)
		if err == nil {
			err = strictHF(m, &cfg)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %s", c.family, err, c.want)
		}
	}
	for _, ok := range []any{"silu", "swish", nil} {
		m := fixtureConfig(t, "llama")
		m["hidden_act"] = ok
		cfg, _ := familyNamed(t, "llama").configHF(m)
		if err := strictHF(m, &cfg); err != nil {
			t.Errorf("hidden_act %v: %v", ok, err)
		}
	}
}

func TestGGUFMetadataReadStrictly(t *testing.T) {
	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"llama.attention.layer_norm_rms_epsilon", "x", "layer_norm_rms_epsilon is \"x\""},
		{"llama.rope.freq_base", []any{1.0}, "freq_base is"},
		{"tokenizer.ggml.eos_token_id", "a", "eos_token_id is \"a\""},
	} {
		m := map[string]any{c.key: c.v, "llama.attention.layer_norm_rms_epsilon": 1e-5}
		m[c.key] = c.v
		if err := strictGGUF(m, "llama"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.key, err)
		}
	}
	if err := strictGGUF(map[string]any{"llama.rope.freq_base": 1e4, "tokenizer.ggml.eos_token_id": int64(2)}, "llama"); err != nil {
		t.Error(err)
	}
}
