// Package embedgemma writes a tiny random EmbeddingGemma for tests, as
// a gemma-embedding GGUF in llama.cpp's layout and as a Hugging Face
// sentence-transformers folder, both from the gemma3 fixture of the
// shared test data (arch/gemma3: 7 layers, hidden 64, every 6th layer
// global) made an encoder: bidirectional attention whose sliding layers
// see 4 positions on either side (a window of 8), no RoPE scaling, mean
// pooling, and the two dense projections of sentence-transformers
// (64 -> 256 -> 64, no bias) drawn from a seeded generator.
package embedgemma

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// Sizes of the fixture: the hidden size, the inner size of the dense
// projections, the sliding window.
const (
	Hidden, Dense = 64, 256
	Window        = 8
)

// DenseWeights returns the fixture's dense projections, dense_2
// [256, 64] and dense_3 [64, 256] (rows are outputs), N(0, 1/fan_in).
func DenseWeights() (d2, d3 []float32) {
	r := rand.New(rand.NewPCG(2, 768))
	draw := func(n, fanIn int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() / math.Sqrt(float64(fanIn)))
		}
		return v
	}
	return draw(Dense*Hidden, Hidden), draw(Hidden*Dense, Dense)
}

// WriteGGUF writes the fixture in the layout llama.cpp's
// converter gives EmbeddingGemma with its dense modules: architecture
// gemma-embedding, pooling_type 1 (mean), dense_2.weight and
// dense_3.weight with their feature counts.
func WriteGGUF(t testing.TB, path string) {
	t.Helper()
	f, err := gguf.Open(testutil.Path(t, "arch/gemma3/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const arch = "gemma-embedding"
	var kv []gguf.KV
	for _, e := range f.KVs() {
		switch {
		case e.Key == "general.architecture":
			e.Value = arch
		case strings.HasPrefix(e.Key, "gemma3.rope.scaling."):
			continue
		case e.Key == "gemma3.attention.sliding_window":
			e.Value = uint32(Window)
		}
		e.Key = strings.Replace(e.Key, "gemma3.", arch+".", 1)
		kv = append(kv, e)
	}
	kv = append(kv, gguf.KV{Key: arch + ".pooling_type", Value: uint32(1)},
		gguf.KV{Key: arch + ".dense_2_feat_in", Value: uint32(Hidden)},
		gguf.KV{Key: arch + ".dense_2_feat_out", Value: uint32(Dense)},
		gguf.KV{Key: arch + ".dense_3_feat_in", Value: uint32(Dense)},
		gguf.KV{Key: arch + ".dense_3_feat_out", Value: uint32(Hidden)})
	var tensors []gguf.WriteTensor
	for _, ti := range f.Tensors() {
		data, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: slices.Clone(data)})
	}
	d2, d3 := DenseWeights()
	tensors = append(tensors,
		gguf.WriteTensor{Name: "dense_2.weight", DType: tensor.F32, Shape: []int64{Dense, Hidden}, Values: d2},
		gguf.WriteTensor{Name: "dense_3.weight", DType: tensor.F32, Shape: []int64{Hidden, Dense}, Values: d3})
	if err := gguf.WriteFile(path, kv, tensors); err != nil {
		t.Fatal(err)
	}
}

// WriteFolder writes the fixture as a sentence-transformers
// folder of Hugging Face's EmbeddingGemma: a Gemma3TextModel (weights
// without the "model." prefix) with use_bidirectional_attention, and the
// modules Transformer, 1_Pooling (mean), 2_Dense and 3_Dense (no bias,
// identity activation), 4_Normalize. The gemma3 fixture's GGUF holds
// q_norm gains times sqrt(head_dim/query_pre_attn_scalar), so that
// llama.cpp's 1/sqrt(head_dim) scale gives the folder's scores: both
// files are one model.
func WriteFolder(t testing.TB, dir string) {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/gemma3/config.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["architectures"] = []string{"Gemma3TextModel"}
	cfg["use_bidirectional_attention"] = true
	cfg["sliding_window"] = Window
	delete(cfg, "rope_scaling")
	ck, err := safetensors.Open(testutil.Path(t, "arch/gemma3/model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var ts []safetensors.Tensor
	for _, ti := range ck.Tensors() {
		v, err := ck.ReadFloat32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: strings.TrimPrefix(ti.Name, "model."), DType: tensor.F32, Shape: ti.Shape, Data: v})
	}
	writeJSON := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON("config.json", cfg)
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	writeJSON("modules.json", []map[string]any{
		{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
		{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
		{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
		{"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
		{"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"},
	})
	writeJSON("1_Pooling/config.json", map[string]any{"word_embedding_dimension": Hidden, "pooling_mode_cls_token": false,
		"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false, "pooling_mode_lasttoken": false})
	d2, d3 := DenseWeights()
	for i, d := range []struct {
		in, out int
		w       []float32
	}{{Hidden, Dense, d2}, {Dense, Hidden, d3}} {
		name := fmt.Sprintf("%d_Dense", i+2)
		writeJSON(name+"/config.json", map[string]any{"in_features": d.in, "out_features": d.out, "bias": false,
			"activation_function": "torch.nn.modules.linear.Identity"})
		if err := safetensors.Write(filepath.Join(dir, name, "model.safetensors"), []safetensors.Tensor{
			{Name: "linear.weight", DType: tensor.F32, Shape: []int64{int64(d.out), int64(d.in)}, Data: d.w}}, nil); err != nil {
			t.Fatal(err)
		}
	}
}
