package tinymodel

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/llama2c"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
)

func bitEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestWriteLlamaReadsBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dtype  tensor.DType
		tied   bool
		shards int
	}{
		{"f32 untied", tensor.F32, false, 0},
		{"bf16 tied", tensor.BF16, true, 0},
		{"f16 sharded", tensor.F16, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Default()
			cfg.DType, cfg.TieWordEmbeddings, cfg.Shards = tc.dtype, tc.tied, tc.shards
			dir := t.TempDir()
			if err := WriteLlama(dir, cfg, 42); err != nil {
				t.Fatal(err)
			}
			if tc.shards > 1 {
				for i := 1; i <= tc.shards; i++ {
					if _, err := os.Stat(filepath.Join(dir, "model-0000"+string(rune('0'+i))+"-of-00003.safetensors")); err != nil {
						t.Error(err)
					}
				}
			}
			c, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			m := c.Metadata()
			for k, v := range map[string]int64{"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
				"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 64,
				"max_position_embeddings": 128, "bos_token_id": 1, "eos_token_id": 2} {
				if got, ok := format.MetaInt(m, k); !ok || got != v {
					t.Errorf("config %s = %v, want %d", k, m[k], v)
				}
			}
			if m["model_type"] != "llama" || m["tie_word_embeddings"] != tc.tied || m["rope_theta"] != 10000.0 || m["rms_norm_eps"] != 1e-5 {
				t.Errorf("config %v", m)
			}
			want, err := Llama(cfg, 42)
			if err != nil {
				t.Fatal(err)
			}
			wantN := 2 + 9*2
			if !tc.tied {
				wantN++
			}
			if len(want) != wantN || len(c.Tensors()) != wantN {
				t.Fatalf("%d generated, %d stored, want %d", len(want), len(c.Tensors()), wantN)
			}
			for name, w := range want {
				ti, ok := format.Find(c, name)
				if !ok || ti.DType != tc.dtype {
					t.Fatalf("%s: %+v", name, ti)
				}
				got, err := c.ReadFloat32(name)
				if err != nil || !bitEqual(got, w.Data) {
					t.Errorf("%s: stored values differ from Llama() (%v)", name, err)
				}
			}
		})
	}
}

// TestInitStatistics checks the documented distributions on a larger model.
func TestInitStatistics(t *testing.T) {
	cfg := Config{HiddenSize: 128, IntermediateSize: 256, NumLayers: 1, NumHeads: 4, NumKVHeads: 4,
		VocabSize: 512, MaxPositions: 64}
	w, err := Llama(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	stats := func(v []float32) (mean, std, lo, hi float64) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, x := range v {
			mean += float64(x)
			lo, hi = min(lo, float64(x)), max(hi, float64(x))
		}
		mean /= float64(len(v))
		for _, x := range v {
			std += (float64(x) - mean) * (float64(x) - mean)
		}
		return mean, math.Sqrt(std / float64(len(v))), lo, hi
	}
	// std of a sample of n normals has relative standard error 1/sqrt(2n);
	// n >= 16384 here, so 5% is over 9 standard errors.
	for name, wantStd := range map[string]float64{
		"model.embed_tokens.weight":              1,
		"model.layers.0.self_attn.q_proj.weight": 1 / math.Sqrt(128),
		"model.layers.0.mlp.down_proj.weight":    1 / math.Sqrt(256),
		"lm_head.weight":                         1 / math.Sqrt(128),
	} {
		mean, std, _, _ := stats(w[name].Data)
		if math.Abs(std/wantStd-1) > 0.05 || math.Abs(mean) > 0.05*wantStd {
			t.Errorf("%s: mean %g std %g, want 0 and %g", name, mean, std, wantStd)
		}
	}
	mean, _, lo, hi := stats(w["model.layers.0.input_layernorm.weight"].Data)
	if lo < 0.5 || hi > 1.5 || math.Abs(mean-1) > 0.1 {
		t.Errorf("norm gains: mean %g range [%g, %g], want U(0.5,1.5)", mean, lo, hi)
	}
	again, _ := Llama(cfg, 1)
	other, _ := Llama(cfg, 2)
	if !bitEqual(again["lm_head.weight"].Data, w["lm_head.weight"].Data) {
		t.Error("same seed gave different weights")
	}
	if bitEqual(other["lm_head.weight"].Data, w["lm_head.weight"].Data) {
		t.Error("different seeds gave the same weights")
	}
}

func TestRejects(t *testing.T) {
	bad := []Config{
		{HiddenSize: 32, IntermediateSize: 48, NumLayers: 1, NumHeads: 4, NumKVHeads: 3, VocabSize: 8, MaxPositions: 8},
		{HiddenSize: 32, IntermediateSize: 0, NumLayers: 1, NumHeads: 4, NumKVHeads: 2, VocabSize: 8, MaxPositions: 8},
		{HiddenSize: 32, IntermediateSize: 48, NumLayers: 1, NumHeads: 4, NumKVHeads: 2, VocabSize: 8, MaxPositions: 8, DType: tensor.I8},
	}
	for i, c := range bad {
		if err := WriteLlama(t.TempDir(), c, 1); err == nil {
			t.Errorf("config %d accepted", i)
		}
	}
	c := Default()
	c.RopeTheta = 5e5
	if err := WriteLlama2C(filepath.Join(t.TempDir(), "x.bin"), c, 1, 1); err == nil {
		t.Error("llama2.c file with rope theta 5e5 written")
	}
	c = Default()
	c.HeadDim = 16
	if err := WriteLlama2C(filepath.Join(t.TempDir(), "x.bin"), c, 1, 1); err == nil || !strings.Contains(err.Error(), "head_dim") {
		t.Errorf("llama2.c file with head_dim 16 != 32/4: %v", err)
	}
	c = Default()
	c.QKNorm = true
	if err := WriteLlama2C(filepath.Join(t.TempDir(), "x.bin"), c, 1, 1); err == nil || !strings.Contains(err.Error(), "QKNorm") {
		t.Errorf("llama2.c file with q/k norms: %v", err)
	}
}

// TestWriteQwen3: QKNorm writes a Qwen3ForCausalLM config with the given
// special ids and a q_norm and k_norm gain of HeadDim per layer.
func TestWriteQwen3(t *testing.T) {
	cfg := Default()
	cfg.QKNorm, cfg.BOSTokenID, cfg.EOSTokenID = true, 60, 61
	dir := t.TempDir()
	if err := WriteLlama(dir, cfg, 3); err != nil {
		t.Fatal(err)
	}
	c, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := c.Metadata()
	if m["model_type"] != "qwen3" || fmt.Sprint(m["architectures"]) != "[Qwen3ForCausalLM]" {
		t.Errorf("config %v", m)
	}
	for k, v := range map[string]int64{"bos_token_id": 60, "eos_token_id": 61} {
		if got, ok := format.MetaInt(m, k); !ok || got != v {
			t.Errorf("config %s = %v, want %d", k, m[k], v)
		}
	}
	if n := len(c.Tensors()); n != 2+11*2+1 {
		t.Errorf("%d tensors, want %d", n, 2+11*2+1)
	}
	for i := range 2 {
		for _, w := range []string{"q_norm", "k_norm"} {
			name := fmt.Sprintf("model.layers.%d.self_attn.%s.weight", i, w)
			ti, ok := format.Find(c, name)
			if !ok || len(ti.Shape) != 1 || ti.Shape[0] != 8 {
				t.Errorf("%s: %+v", name, ti)
			}
		}
	}
}

// Ensure the llama2c reader accepts every version the generator writes.
func TestWriteLlama2CVersions(t *testing.T) {
	for v := range 3 {
		path := filepath.Join(t.TempDir(), "m.bin")
		if err := WriteLlama2C(path, Default(), 3, v); err != nil {
			t.Fatal(err)
		}
		c, err := llama2c.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.Version() != v || c.Config().SeqLen != 128 || c.Config().SharedClassifier {
			t.Errorf("version %d: %+v", c.Version(), c.Config())
		}
		c.Close()
	}
}
