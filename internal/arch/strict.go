package arch

import (
	"fmt"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
)

// Values a config may hold that no family reader looks at in detail are
// still read strictly: a field of the wrong type, or a value the family's
// graph does not implement, is an error naming the field rather than a
// silent default.

// hfNumbers are config.json fields that must be numbers when present.
var hfNumbers = []string{"rms_norm_eps", "rope_theta", "layer_norm_eps", "layer_norm_epsilon",
	"partial_rotary_factor", "attention_multiplier", "embedding_multiplier", "residual_multiplier",
	"logits_scaling", "final_logit_softcapping", "attn_logit_softcapping", "query_pre_attn_scalar",
	"rope_local_base_freq", "sliding_window"}

// strictHF checks config.json's typed fields and the activation against
// what the family computes (c is the config the family read).
func strictHF(m map[string]any, c *Config) error {
	for _, k := range hfNumbers {
		if v, ok := m[k]; ok && v != nil {
			if _, ok := format.MetaFloat(m, k); !ok {
				return fmt.Errorf("config.json: %q is %s, not a number", k, show(v))
			}
		}
	}
	if v, ok := m["rope_scaling"]; ok && v != nil {
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("config.json: \"rope_scaling\" is %s, not an object", show(v))
		}
	}
	for _, k := range []string{"eos_token_id", "bos_token_id"} {
		if err := tokenIDs(m, k, "config.json"); err != nil {
			return err
		}
	}
	if c.RWKV != nil {
		return nil
	}
	for _, k := range []string{"hidden_act", "hidden_activation"} {
		v, ok := m[k]
		if !ok || v == nil {
			continue
		}
		s, _ := v.(string)
		switch {
		case !c.GELU && (s == "silu" || s == "swish"):
		case c.GELU && (s == "gelu" || s == "gelu_pytorch_tanh" || s == "gelu_new" || s == "gelu_fast"):
		default:
			want := "silu"
			if c.GELU {
				want = "tanh-approximated gelu"
			}
			return fmt.Errorf("config.json: %q is %s; the %s family computes %s", k, show(v), c.Family, want)
		}
	}
	return nil
}

// strictGGUF checks the typed metadata of a GGUF decoder.
func strictGGUF(m map[string]any, arch string) error {
	for _, k := range []string{".attention.layer_norm_rms_epsilon", ".attention.layer_norm_epsilon", ".rope.freq_base", ".rope.scaling.factor"} {
		if v, ok := m[arch+k]; ok && v != nil {
			if _, ok := format.MetaFloat(m, arch+k); !ok {
				return fmt.Errorf("gguf: metadata %s is %s, not a number", arch+k, show(v))
			}
		}
	}
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id"} {
		if v, ok := m[k]; ok && v != nil {
			if _, ok := format.MetaInt(m, k); !ok {
				return fmt.Errorf("gguf: metadata %s is %s, not a token id", k, show(v))
			}
		}
	}
	return nil
}

// tokenIDs checks that m[k] is absent, null, an integer or a list of them.
func tokenIDs(m map[string]any, k, file string) error {
	v, ok := m[k]
	if !ok || v == nil {
		return nil
	}
	bad := fmt.Errorf("%s: %q is %s, not a token id or a list of them", file, k, show(v))
	list, isList := format.List(v)
	if !isList {
		list = []any{v}
	}
	for _, e := range list {
		if n, ok := format.MetaInt(map[string]any{"v": e}, "v"); !ok || n < 0 {
			return bad
		}
	}
	return nil
}

// show formats a config value for an error, quoted and bounded.
func show(v any) string {
	s := fmt.Sprintf("%#v", v)
	if str, ok := v.(string); ok {
		s = fmt.Sprintf("%q", str)
	}
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return strings.ReplaceAll(s, "interface {}", "any")
}
