package arch

import (
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/testutil"
)

// editedCheckpoint wraps a checkpoint, hiding or reshaping some tensors.
type editedCheckpoint struct {
	format.Checkpoint
	drop    string
	reshape map[string][]int64
	zero    string // tensor read back as all ones (non-zero)
}

func (c *editedCheckpoint) Tensors() []format.TensorInfo {
	var out []format.TensorInfo
	for _, t := range c.Checkpoint.Tensors() {
		if t.Name == c.drop {
			continue
		}
		if s, ok := c.reshape[t.Name]; ok {
			t.Shape = s
		}
		out = append(out, t)
	}
	return out
}

func (c *editedCheckpoint) ReadFloat32(name string) ([]float32, error) {
	v, err := c.Checkpoint.ReadFloat32(name)
	if err == nil && name == c.zero {
		for i := range v {
			v[i] = 1
		}
	}
	return v, err
}

func openRWKV7(t *testing.T) format.Checkpoint {
	ck, err := detect.Open(testutil.Path(t, "rwkv/260123_reverse_L2_only_rwkv7.pth"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// TestRWKV7Config checks the sizes inferred from the tensor shapes (the
// reference's config: 2 layers, 32 wide, 2 heads of 16, vocabulary 12,
// FFN 128, LoRA dims 8).
func TestRWKV7Config(t *testing.T) {
	m, err := Load(openRWKV7(t))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	r := c.RWKV
	if c.Family != "rwkv7" || c.Layers != 2 || c.Hidden != 32 || c.Heads != 2 || c.HeadDim != 16 ||
		c.Vocab != 12 || c.FFN != 128 || r.DecayLoRA != 8 || r.ALoRA != 8 || r.VLoRA != 8 || r.GateLoRA != 8 ||
		r.GroupNormEps != 64e-5 || c.NormEps != 1e-5 {
		t.Errorf("config %+v, rwkv %+v", c, *r)
	}
	// w1 is [C, 8] in the file and [8, C] here: element (i, j) moves to (j, i)
	ck := openRWKV7(t)
	raw, err := ck.ReadFloat32("rwkv1.w1")
	if err != nil {
		t.Fatal(err)
	}
	got := m.Weights["rwkv1.w1"]
	if raw[3*8+5] != got[5*32+3] || raw[31*8+7] != got[7*32+31] || raw[3*8+5] == raw[5*8+3] {
		t.Errorf("rwkv1.w1 is not transposed")
	}
}

// TestRWKV7ConfigValidate checks that Config.Validate, which a quantized
// folder's manifest is checked with, applies the family's own rule: the
// checkpoint's config (no rope, no key/value heads of attention) passes,
// one without its RWKV sizes or with heads that do not make the hidden
// size fails, and another family's config is still held to the attention
// rule.
func TestRWKV7ConfigValidate(t *testing.T) {
	m, err := Load(openRWKV7(t))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.RopeTheta != 0 {
		t.Fatalf("rope theta %v: the test needs a config without rope", c.RopeTheta)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("the checkpoint's config: %v", err)
	}
	bad := c
	bad.RWKV = nil
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "rwkv sizes are missing") {
		t.Errorf("no RWKV sizes: %v", err)
	}
	bad = c
	bad.Heads = 3
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "do not make the hidden size") {
		t.Errorf("3 heads of 16: %v", err)
	}
	llama := c
	llama.Family, llama.RWKV = "llama", nil
	if err := llama.Validate(); err == nil || !strings.Contains(err.Error(), "rope theta") {
		t.Errorf("a llama config without rope theta: %v", err)
	}
}

// TestRWKV7Hostile checks that a checkpoint missing a tensor, with a
// wrongly shaped one, or with an active ROSA branch is refused with an
// error naming the tensor.
func TestRWKV7Hostile(t *testing.T) {
	for _, c := range []struct {
		ck   *editedCheckpoint
		want string
	}{
		{&editedCheckpoint{drop: "rwkv2.k_a"}, `"rwkv2.k_a"`},
		{&editedCheckpoint{drop: "rosa1.o.bias"}, `"rosa1.o.bias"`},
		{&editedCheckpoint{drop: "e.weight"}, `"e.weight"`},
		{&editedCheckpoint{reshape: map[string][]int64{"rwkv1.a2": {32, 8}}}, `"rwkv1.a2"`},
		{&editedCheckpoint{reshape: map[string][]int64{"ffn2.value.weight": {32, 64}}}, `"ffn2.value.weight"`},
		{&editedCheckpoint{reshape: map[string][]int64{"rwkv2.x_g": {32}}}, `"rwkv2.x_g"`},
		{&editedCheckpoint{reshape: map[string][]int64{"rwkv1.r_k": {3, 16}}}, "hidden size"},
		{&editedCheckpoint{zero: "rosa2.rosa_qkv.emb"}, `"rosa2.rosa_qkv.emb"`},
	} {
		c.ck.Checkpoint = openRWKV7(t)
		_, err := Load(c.ck)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("drop %q reshape %v emb %q: error %v, want one naming %s", c.ck.drop, c.ck.reshape, c.ck.zero, err, c.want)
		}
	}
}
