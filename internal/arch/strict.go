package arch

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
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
		rs, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("config.json: \"rope_scaling\" is %s, not an object", show(v))
		}
		for _, k := range ropeScalingNumbers {
			if v, ok := rs[k]; ok && v != nil {
				if _, ok := format.MetaFloat(rs, k); !ok {
					return fmt.Errorf("config.json: \"rope_scaling.%s\" is %s, not a number", k, show(v))
				}
			}
		}
	}
	if err := finiteValues(m, "config.json: ", ""); err != nil {
		return err
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
	hyper := map[string]any{}
	for k, v := range m {
		// the model's own keys; tokenizer scores may hold -inf
		if strings.HasPrefix(k, arch+".") || strings.HasPrefix(k, "general.") {
			hyper[k] = v
		}
	}
	return finiteValues(hyper, "gguf: metadata ", "")
}

// ropeScalingNumbers are rope_scaling fields that must be numbers when
// present (a string there would otherwise read as the default).
var ropeScalingNumbers = []string{"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
	"attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"}

// finiteValues refuses a NaN or infinite number anywhere in v (objects,
// lists and typed GGUF arrays, recursively), and a string spelling one
// ("NaN", "Infinity", "-inf"), naming the key: prefix, then the key path.
func finiteValues(v any, prefix, path string) error {
	bad := func(what string) error {
		return fmt.Errorf("%s%s is %s, not a finite number", prefix, path, what)
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if err := finiteValues(x[k], prefix, p); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := finiteValues(e, prefix, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case []float32:
		for i, f := range x {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return finiteValues(float64(f), prefix, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case []float64:
		for i, f := range x {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return finiteValues(f, prefix, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return bad(strconv.FormatFloat(x, 'g', -1, 64))
		}
	case float32:
		return finiteValues(float64(x), prefix, path)
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return bad(strconv.Quote(x))
		}
	}
	return nil
}

// finiteConfig refuses a NaN or infinite float anywhere in a Config (or a
// struct, slice or pointer inside it), naming the field by its JSON name.
func finiteConfig(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return finiteConfig(v.Elem(), path)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			if path != "" {
				name = path + "." + name
			}
			if err := finiteConfig(v.Field(i), name); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := finiteConfig(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if err := finiteConfig(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key())); err != nil {
				return err
			}
		}
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("config: %s is %v, not a finite number", path, f)
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
