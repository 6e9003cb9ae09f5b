package arch

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// tinyFolder writes a random Llama of layers layers and rewrites its
// config.json with edit.
func tinyFolder(t *testing.T, layers int, edit func(m map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	cfg := tinymodel.Default()
	cfg.NumLayers = layers
	if err := tinymodel.WriteLlama(dir, cfg, 3); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openFolder(t *testing.T, dir string) error {
	t.Helper()
	ck, err := detect.Open(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	_, err = Open(ck)
	return err
}

// TestExtraLayersAreRefused: a checkpoint with tensors of more layers than
// its config declares is an error naming the field and the first extra
// tensor (they were dropped without a word); the declared count loads.
func TestExtraLayersAreRefused(t *testing.T) {
	for _, c := range []struct{ present, declared int }{{3, 2}, {4, 1}, {5, 3}} {
		dir := tinyFolder(t, c.present, func(m map[string]any) { m["num_hidden_layers"] = c.declared })
		err := openFolder(t, dir)
		if err == nil || !strings.Contains(err.Error(), "num_hidden_layers") || !strings.Contains(err.Error(), "model.layers.") {
			t.Errorf("%d layers present, %d declared: %v", c.present, c.declared, err)
		}
	}
	if err := openFolder(t, tinyFolder(t, 3, func(map[string]any) {})); err != nil {
		t.Errorf("3 layers as declared: %v", err)
	}
	// fewer layers present than declared: a missing tensor, named
	err := openFolder(t, tinyFolder(t, 2, func(m map[string]any) { m["num_hidden_layers"] = 3 }))
	if err == nil || !strings.Contains(err.Error(), "model.layers.2.") {
		t.Errorf("2 layers present, 3 declared: %v", err)
	}
}

// TestNonFiniteHyperParametersAreRefused: a NaN or infinite value (a JSON
// string spelling one, a number the reader made, a GGUF float) or a
// rope_scaling field that is not a number is an error naming the field,
// not a default (a rope factor "NaN" read as 1).
func TestNonFiniteHyperParametersAreRefused(t *testing.T) {
	for _, c := range []struct {
		want string
		mut  func(m map[string]any)
	}{
		{"rope_scaling.factor", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": "NaN"}
		}},
		{"rope_scaling.factor", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": math.Inf(1)}
		}},
		{"rope_scaling.low_freq_factor", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": "-Infinity"}
		}},
		{"rope_scaling.original_max_position_embeddings", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": "big"}
		}},
		{"rms_norm_eps", func(m map[string]any) { m["rms_norm_eps"] = math.Inf(1) }},
		{"rope_theta", func(m map[string]any) { m["rope_theta"] = math.NaN() }},
		{"rope_theta", func(m map[string]any) { m["rope_theta"] = "inf" }},
		{"text_config.initializer_range", func(m map[string]any) {
			m["text_config"] = map[string]any{"initializer_range": math.NaN()}
		}},
	} {
		m := fixtureConfig(t, "llama")
		c.mut(m)
		f := familyNamed(t, "llama")
		cfg, err := f.configHF(m)
		if err == nil {
			err = strictHF(m, &cfg)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: %v", c.want, err)
		}
	}
	for _, c := range []struct {
		key string
		v   any
	}{
		{"llama.attention.layer_norm_rms_epsilon", math.Inf(1)},
		{"llama.rope.scaling.factor", math.NaN()},
		{"llama.rope.freq_base", math.NaN()},
		{"llama.some_future_scale", []float32{1, float32(math.Inf(-1))}},
		{"general.sampling.temp", math.Inf(-1)},
	} {
		m := map[string]any{"llama.attention.layer_norm_rms_epsilon": 1e-5, c.key: c.v}
		if err := strictGGUF(m, "llama"); err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), "finite") {
			t.Errorf("%s = %v: %v", c.key, c.v, err)
		}
	}
	// the tokenizer's scores are not hyper-parameters (some hold -inf)
	if err := strictGGUF(map[string]any{"tokenizer.ggml.scores": []float32{float32(math.Inf(-1))}}, "llama"); err != nil {
		t.Errorf("tokenizer scores: %v", err)
	}
	// a value a family derives is checked too, named by its field
	c := Config{NormEps: 1e-5, RopeTheta: 1e4, RopeScaling: RopeScaling{Type: "linear", Factor: math.NaN()}}
	if err := finiteConfig(reflectValue(c), ""); err == nil || !strings.Contains(err.Error(), "rope_scaling") {
		t.Errorf("derived NaN factor: %v", err)
	}
	c.RopeScaling.Factor, c.RopeFreqFactors = 2, []float32{1, float32(math.Inf(1))}
	if err := finiteConfig(reflectValue(c), ""); err == nil || !strings.Contains(err.Error(), "rope_freq_factors[1]") {
		t.Errorf("rope_freqs with inf: %v", err)
	}
	c.RopeFreqFactors = []float32{1, 2}
	if err := finiteConfig(reflectValue(c), ""); err != nil {
		t.Errorf("finite config: %v", err)
	}
}

func reflectValue(c Config) reflect.Value { return reflect.ValueOf(c) }

// tinyFolderWith writes the random Llama of tinyFolder with extra tensors
// added to its weights.
func tinyFolderWith(t *testing.T, extra map[string][]int64) string {
	t.Helper()
	dir := tinyFolder(t, 2, func(map[string]any) {})
	w, err := tinymodel.Llama(tinymodel.Default(), 3)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for name, x := range w {
		ts = append(ts, safetensors.Tensor{Name: name, DType: tensor.F32, Shape: x.Shape, Data: x.Data})
	}
	for name, shape := range extra {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: tensor.F32, Shape: shape, Data: make([]float32, n)})
	}
	if err := safetensors.Write(filepath.Join(dir, safetensors.SingleName), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUnreadLayerTensorsAreRefused: a kind of layer tensor that no layer
// of the declared model reads (biases beside attention_bias false, a norm
// the family does not have) is an error naming it instead of weights
// dropped without a word; rotary tables old exporters saved are not
// weights and load.
func TestUnreadLayerTensorsAreRefused(t *testing.T) {
	for _, name := range []string{"model.layers.0.self_attn.q_proj.bias", "model.layers.1.mlp.down_proj.bias",
		"model.layers.1.self_attn.q_norm.weight", "model.layers.0.post_feedforward_layernorm.weight"} {
		err := openFolder(t, tinyFolderWith(t, map[string][]int64{name: {32}}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := openFolder(t, tinyFolderWith(t, map[string][]int64{"model.layers.0.self_attn.rotary_emb.inv_freq": {4}})); err != nil {
		t.Errorf("rotary table: %v", err)
	}
	if err := openFolder(t, tinyFolderWith(t, nil)); err != nil {
		t.Errorf("rewritten weights: %v", err)
	}
}
