package llama2c

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestStories260K checks the real legacy checkpoint against the facts in
// the test data's PROVENANCE.md.
func TestStories260K(t *testing.T) {
	path := testutil.Path(t, "llama2c/stories260K.bin")
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := Config{Dim: 64, HiddenDim: 172, NLayers: 5, NHeads: 8, NKVHeads: 4, VocabSize: 512, SeqLen: 512}
	if c.Config() != want || c.Version() != 0 || c.Format() != "llama2c" {
		t.Fatalf("config %+v version %d, want %+v version 0", c.Config(), c.Version(), want)
	}
	m := c.Metadata()
	for k, v := range map[string]int64{"dim": 64, "hidden_dim": 172, "n_layers": 5, "n_heads": 8,
		"n_kv_heads": 4, "vocab_size": 512, "seq_len": 512, "version": 0} {
		if got, ok := format.MetaInt(m, k); !ok || got != v {
			t.Errorf("metadata %s = %v, want %d", k, m[k], v)
		}
	}
	if m["shared_classifier"] != false {
		t.Errorf("shared_classifier = %v, want false (vocab_size is -512 in the file)", m["shared_classifier"])
	}
	// 1 embedding + 9 per layer + norm + 2 freq tables + classifier.
	ts := c.Tensors()
	if len(ts) != 1+9*5+1+2+1 {
		t.Errorf("%d tensors, want 50", len(ts))
	}
	st, _ := os.Stat(path)
	end := int64(28)
	for _, ti := range ts {
		if ti.Offset != end {
			t.Errorf("%s at %d, want %d", ti.Name, ti.Offset, end)
		}
		end += ti.Size
	}
	if end != st.Size() || end != 1187612 {
		t.Errorf("tensors end at %d, file is %d bytes (PROVENANCE: 1187612)", end, st.Size())
	}
	shapes := map[string][]int64{
		"tok_embeddings.weight":           {512, 64},
		"layers.4.attention.wq.weight":    {64, 64},
		"layers.4.attention.wk.weight":    {32, 64},
		"layers.0.attention.wv.weight":    {32, 64},
		"layers.2.attention.wo.weight":    {64, 64},
		"layers.1.feed_forward.w1.weight": {172, 64},
		"layers.1.feed_forward.w2.weight": {64, 172},
		"layers.3.feed_forward.w3.weight": {172, 64},
		"layers.3.ffn_norm.weight":        {64},
		"layers.3.attention_norm.weight":  {64},
		"norm.weight":                     {64},
		"output.weight":                   {512, 64},
		NameFreqReal:                      {512, 4},
		NameFreqImag:                      {512, 4},
	}
	for name, shape := range shapes {
		ti, ok := format.Find(c, name)
		if !ok || fmt.Sprint(ti.Shape) != fmt.Sprint(shape) {
			t.Errorf("%s: %v (found %v), want %v", name, ti.Shape, ok, shape)
		}
	}
	emb, err := c.ReadFloat32("tok_embeddings.weight")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.ReadFloat32("output.weight")
	if err != nil {
		t.Fatal(err)
	}
	if !bitEqual(emb, out) {
		t.Error("output.weight differs from tok_embeddings.weight (PROVENANCE: the GGUF's output equals token_embd)")
	}

	// RoPE tables: cos/sin of p * 10000^(-2i/8), computed here in float64.
	// Budget 1e-6: float32 rounding of the values (6e-8) with margin, yet
	// 500x below the error of a float32 angle at p=511 (~3e-5).
	re, _ := c.ReadFloat32(NameFreqReal)
	im, _ := c.ReadFloat32(NameFreqImag)
	var worst float64
	for p := range 512 {
		for i := range 4 {
			a := float64(p) * math.Pow(10000, -float64(2*i)/8)
			worst = max(worst, math.Abs(float64(re[p*4+i])-math.Cos(a)), math.Abs(float64(im[p*4+i])-math.Sin(a)))
		}
	}
	if worst > 1e-6 {
		t.Errorf("freq tables differ from theta-10000 RoPE by %g (budget 1e-6)", worst)
	}
	t.Logf("freq table max |err| vs float64 RoPE: %g", worst)
	wantRe, wantIm := FreqCis(512, 8, RopeTheta)
	var ulps int
	for i := range re {
		ulps = max(ulps, ulpDiff(re[i], wantRe[i]), ulpDiff(im[i], wantIm[i]))
	}
	if ulps > 1 {
		t.Errorf("FreqCis differs from the file's tables by %d ulps (budget 1)", ulps)
	}
}

// TestStories260KRewrite writes the real checkpoint back as version 0 (the
// bytes must be identical), as version 1 (every tensor bit-identical) and
// as version 2 (within the quantization bound).
func TestStories260KRewrite(t *testing.T) {
	path := testutil.Path(t, "llama2c/stories260K.bin")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	all := map[string][]float32{}
	for _, ti := range c.Tensors() {
		if all[ti.Name], err = c.ReadFloat32(ti.Name); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	v0 := filepath.Join(dir, "v0.bin")
	if err := WriteV0(v0, c.Config(), all); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(v0); !bytes.Equal(b, orig) {
		t.Error("version 0 rewrite is not byte-identical to the original")
	}
	weights := map[string][]float32{}
	for k, v := range all {
		if k != NameFreqReal && k != NameFreqImag {
			weights[k] = v
		}
	}
	v1 := filepath.Join(dir, "v1.bin")
	if err := WriteV1(v1, c.Config(), weights); err != nil {
		t.Fatal(err)
	}
	c1, err := Open(v1)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if len(c1.Tensors()) != len(weights) {
		t.Errorf("v1 has %d tensors, want %d", len(c1.Tensors()), len(weights))
	}
	for name, v := range weights {
		got, err := c1.ReadFloat32(name)
		if err != nil || !bitEqual(got, v) {
			t.Errorf("v1 %s differs (%v)", name, err)
		}
	}
	v2 := filepath.Join(dir, "v2.bin")
	if err := WriteV2(v2, c.Config(), weights); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(v2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.Config().GroupSize != 64 {
		t.Errorf("group size %d, want 64", c2.Config().GroupSize)
	}
	checkV2(t, c2, weights)
}
