package mobile

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// writeAdapter writes a random rank-4 PEFT adapter on the attention and
// MLP projections of the model at src into a new folder, strong enough
// to change a greedy reply.
func writeAdapter(t *testing.T, src string) string {
	t.Helper()
	ck, err := detect.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	s, err := arch.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	var ts []safetensors.Tensor
	for _, name := range s.Names() {
		if !strings.HasSuffix(name, "_proj.weight") || len(s.Shapes[name]) != 2 {
			continue
		}
		hf, ok := arch.TensorNameIn(&s.Config, "hf", name)
		if !ok {
			t.Fatalf("%s has no Hugging Face name", name)
		}
		out, in := s.Shapes[name][0], s.Shapes[name][1]
		a, b := make([]float32, 4*in), make([]float32, out*4)
		for i := range a {
			a[i] = float32(rng.NormFloat64() / math.Sqrt(float64(in)))
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64() * 0.3)
		}
		mod := "base_model.model." + strings.TrimSuffix(hf, ".weight")
		ts = append(ts,
			safetensors.Tensor{Name: mod + ".lora_A.weight", DType: tensor.F32, Shape: []int64{4, int64(in)}, Data: a},
			safetensors.Tensor{Name: mod + ".lora_B.weight", DType: tensor.F32, Shape: []int64{int64(out), 4}, Data: b})
	}
	if len(ts) == 0 {
		t.Fatal("no projection to adapt")
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "bias": "none"})
	if err := os.WriteFile(filepath.Join(dir, lora.ConfigName), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, lora.WeightsName), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// reply sends one greedy message on a new chat of m with the adapter
// name at scale ("" for none) and returns the reply.
func reply(t *testing.T, m *Model, name string, scale float64) string {
	t.Helper()
	c, err := m.NewChat("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Temperature = 0
	if err := c.SetAdapter(name, scale); err != nil {
		t.Fatal(err)
	}
	if c.Adapter() != name || (name != "" && c.AdapterScale() != scale) {
		t.Fatalf("the chat applies %q at %g, want %q at %g", c.Adapter(), c.AdapterScale(), name, scale)
	}
	r, err := c.Send("Once upon a time", 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAdapters loads an adapter through the bound API, applies it to a
// chat at scales 1 and 0.5 and checks the greedy replies against the
// models with the adapter merged at those scales (compile --lora); no
// adapter gives the base's reply, and the adapter changes it. 8-bit
// storage loads too; bad storage, names and paths are errors, and a
// removed adapter can no longer be chosen.
func TestAdapters(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	ad := writeAdapter(t, src)
	open := func(specs []lora.Spec) *Model {
		path := filepath.Join(t.TempDir(), "stories.aot")
		if err := compile.CompileFile(src, path, compile.Options{ARLens: []int{8}, Ctx: 256, LoRA: specs}); err != nil {
			t.Fatal(err)
		}
		m, err := Open(path, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if err := m.SetChatTemplate(chatML); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open(nil)
	if err := m.LoadAdapter("a", ad, 1, "f32"); err != nil {
		t.Fatal(err)
	}
	if err := m.LoadAdapter("q", ad, 1, "q8"); err != nil {
		t.Fatal(err)
	}
	if got := m.AdaptersJSON(); got != `["a","q"]` {
		t.Fatalf("AdaptersJSON = %s", got)
	}
	for _, bad := range []struct{ name, path, storage string }{{"b", ad, "int4"}, {"", ad, ""}, {"b", filepath.Join(ad, "missing"), ""}} {
		if err := m.LoadAdapter(bad.name, bad.path, 1, bad.storage); err == nil {
			t.Errorf("LoadAdapter(%q, %q, %q) succeeded", bad.name, bad.path, bad.storage)
		}
	}
	base := reply(t, m, "", 0)
	for _, scale := range []float64{1, 0.5} {
		want := reply(t, open([]lora.Spec{{Path: ad, Scale: scale}}), "", 0)
		got := reply(t, m, "a", scale)
		t.Logf("scale %g: base %q, adapter %q, merged %q", scale, base, got, want)
		if got != want {
			t.Errorf("scale %g: the adapter at run time replies %q, merged %q", scale, got, want)
		}
		if scale == 1 && got == base {
			t.Errorf("the adapter does not change the reply %q", base)
		}
	}
	t.Logf("8-bit adapter: %q", reply(t, m, "q", 1))
	if !m.RemoveAdapter("a") || m.RemoveAdapter("a") {
		t.Fatal("RemoveAdapter does not report the adapter once")
	}
	if got := m.AdaptersJSON(); got != `["q"]` {
		t.Fatalf("after removing a: AdaptersJSON = %s", got)
	}
	c, err := m.NewChat("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetAdapter("a", 1); err == nil {
		t.Fatal("a removed adapter was chosen")
	}
}
