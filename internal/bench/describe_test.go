package bench

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/testutil"
)

// storiesParts compiles stories260K (AR lengths 1 and 2, context 16) and
// returns its manifest as a map, its blobs by name and the artifact.
func storiesParts(t testing.TB) (map[string]any, map[string][]byte, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stories.aot")
	err := compile.CompileFile(testutil.Path(t, "models/stories260K/stories260K.gguf"), path,
		compile.Options{ARLens: []int{2}, Ctx: 16})
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifact.Open(path, artifact.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var m map[string]any
	if err := a.Manifest(&m); err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{}
	for _, s := range a.Blobs() {
		b, err := a.Blob(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		blobs[s.Name] = append([]byte(nil), b...)
	}
	return m, blobs, path
}

// writeArtifact writes an artifact holding manifest and blobs (plans under
// "plan/", the rest as plain blobs) and one small tensor, and opens it.
func writeArtifact(t testing.TB, manifest []byte, blobs map[string][]byte) (*artifact.Artifact, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.aot")
	w, err := artifact.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.SetManifest(json.RawMessage(manifest)); err != nil {
		return nil, err
	}
	if err := w.AddTensor("w", 1, []int64{2, 2}, "", make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	for name, b := range blobs {
		kind := artifact.KindBlob
		if strings.HasPrefix(name, "plan/") {
			kind = artifact.KindPlan
		}
		if err := w.AddBlob(kind, name, b); err != nil {
			return nil, err
		}
	}
	if err := w.Commit(); err != nil {
		return nil, err
	}
	return artifact.Open(path, artifact.OpenOptions{})
}

func TestDescribeStories(t *testing.T) {
	_, _, path := storiesParts(t)
	a, err := artifact.Open(path, artifact.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	info, err := Describe(a)
	if err != nil {
		t.Fatal(err)
	}
	s := info.Sizes
	// the cache is layers x ctx x kv cols x 2 x 4, in the manifest's own
	// hyper-parameters
	hp := info.Manifest.HyperParams
	layers, kvHeads, headDim := hp["num_layers"].(float64), hp["num_kv_heads"].(float64), hp["head_dim"].(float64)
	if want := int64(layers*kvHeads*headDim) * 16 * 2 * 4; s.KV.Bytes != want || s.KV.ElemBytes != 4 {
		t.Errorf("KV %+v, want %d bytes", s.KV, want)
	}
	var tensors int64
	for _, ti := range a.Tensors() {
		tensors += ti.Size
	}
	if s.File != a.Size() || s.Tensors["f32"] != tensors || s.Sections["weights"] != tensors+s.Tensors["padding"] {
		t.Errorf("file %d, tensors %v, sections %v", s.File, s.Tensors, s.Sections)
	}
	if len(s.Arenas) != 2 || s.Arenas[0].ARLen != 1 || s.Arenas[1].ARLen != 2 || s.Session != s.KV.Bytes+s.Arenas[1].Bytes {
		t.Errorf("arenas %+v, session %d", s.Arenas, s.Session)
	}
	// JSON: the manifest's fields plus "sizes"
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]json.RawMessage
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"architecture", "hyper_params", "plans", "ctx", "weights", "tokenizer", "sizes"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
}

// TestDescribeHostile rewrites the stories artifact with a broken manifest
// or plan: Describe refuses each, naming the field or blob.
func TestDescribeHostile(t *testing.T) {
	m, blobs, _ := storiesParts(t)
	clone := func() map[string]any {
		b, _ := json.Marshal(m)
		var c map[string]any
		json.Unmarshal(b, &c)
		return c
	}
	cases := []struct {
		name  string
		edit  func(map[string]any, map[string][]byte)
		field string
	}{
		{"unknown kv dtype", func(m map[string]any, _ map[string][]byte) { m["kv_cache"] = map[string]any{"dtype": "q3"} }, "manifest.kv_cache.dtype"},
		{"kv cache not an object", func(m map[string]any, _ map[string][]byte) { m["kv_cache"] = 5 }, "kv_cache"},
		{"wrong format", func(m map[string]any, _ map[string][]byte) { m["format"] = "other/9" }, "manifest.format"},
		{"zero ctx", func(m map[string]any, _ map[string][]byte) { m["ctx"] = 0 }, "manifest.ctx"},
		{"missing plan blob", func(_ map[string]any, b map[string][]byte) { delete(b, "plan/ar2") }, "plan/ar2"},
		{"corrupt plan", func(_ map[string]any, b map[string][]byte) { b["plan/ar2"] = []byte(`{"version":1,"rows":2}`) }, "plan/ar2"},
		{"truncated plan", func(_ map[string]any, b map[string][]byte) { b["plan/ar1"] = b["plan/ar1"][:100] }, "plan/ar1"},
	}
	for _, c := range cases {
		mm, bb := clone(), map[string][]byte{}
		for k, v := range blobs {
			bb[k] = v
		}
		c.edit(mm, bb)
		raw, _ := json.Marshal(mm)
		a, err := writeArtifact(t, raw, bb)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = Describe(a)
		a.Close()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.field)
		}
	}
}

// TestKVElemBytes checks the cache element size read from the manifest.
func TestKVElemBytes(t *testing.T) {
	for in, want := range map[string]int{`{}`: 4, `{"kv_cache":null}`: 4, `{"kv_cache":{"dtype":"f32"}}`: 4,
		`{"kv_cache":{"dtype":"u8","k":[[1]]}}`: 1, `{"kv_cache":{"dtype":"f16"}}`: 2, `{"kv_cache":{"dtype":"q4"}}`: 0, `{"kv_cache":{"dtype":"q3"}}`: -1, `{"kv_cache":[]}`: -1} {
		got, err := kvElemBytes([]byte(in))
		if want < 0 {
			if err == nil || !strings.Contains(err.Error(), "manifest.kv_cache") {
				t.Errorf("%s: %d, %v; want an error naming manifest.kv_cache", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", in, got, err, want)
		}
	}
}

// FuzzDescribe feeds arbitrary manifests and AR-2 plans, next to stories'
// real AR-1 plan, to Describe: it must never panic.
func FuzzDescribe(f *testing.F) {
	m, blobs, _ := storiesParts(f)
	raw, _ := json.Marshal(m)
	f.Add(raw, blobs["plan/ar2"][:min(len(blobs["plan/ar2"]), 2000)])
	f.Add([]byte(`{"format":"aotlm-model/1","vocab":512,"ctx":16,"bos":-1,"plans":[{"ar_len":1,"blob":"plan/ar1"},{"ar_len":2,"blob":"plan/ar2"}],"kv_cache":{"dtype":"u8"}}`), []byte(`{}`))
	f.Add([]byte(`{"kv_cache":null,"plans":[{"ar_len":99999999999,"blob":""}]}`), []byte(`[`))
	f.Fuzz(func(t *testing.T, manifest, plan2 []byte) {
		bb := map[string][]byte{"plan/ar1": blobs["plan/ar1"], "plan/ar2": plan2}
		a, err := writeArtifact(t, manifest, bb)
		if err != nil {
			return
		}
		defer a.Close()
		if info, err := Describe(a); err == nil {
			if _, err := json.Marshal(info); err != nil {
				t.Errorf("described artifact does not marshal: %v", err)
			}
		}
	})
}

// TestDescribeRecurrentState compiles the qwen35 fixture and checks that
// a session's memory counts the recurrent state sets it keeps: the conv
// and delta-rule state of its 6 DeltaNet layers, 17 sets (a state this
// small fills the state cache's default), and no conv window (the model
// has other state than convolutions).
func TestDescribeRecurrentState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen35.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/qwen35"), path, compile.Options{ARLens: []int{8}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.Open(path, artifact.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	info, err := Describe(a)
	if err != nil {
		t.Fatal(err)
	}
	s := info.Sizes
	// per DeltaNet layer: conv 3 rows x 128 channels, delta 4 heads x 16 x 16
	want := int64(6 * (3*128 + 4*16*16) * 4)
	if s.State != want || s.StateSets != 17 || s.ConvWindow != 0 || s.Session != s.KV.Bytes+s.Arenas[1].Bytes+17*want {
		t.Errorf("state %d (want %d), sets %d, conv window %d, session %d", s.State, want, s.StateSets, s.ConvWindow, s.Session)
	}
	var out strings.Builder
	if err := info.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "recurrent state") {
		t.Errorf("the text has no recurrent state line:\n%s", out.String())
	}
}

// TestDescribeWindowRing compiles the gemma4 fixture (sliding window 8;
// 4 cache layers, 3 of them sliding) with AR-8 for 256 positions and
// checks that the KV cache counts the sliding layers' rings, 2*(8+2*8)
// slots each, in the sizes, the session memory and the text, and that a
// session allocates exactly that.
func TestDescribeWindowRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gemma4.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/gemma4/model.gguf"), path, compile.Options{ARLens: []int{8}, Ctx: 256}); err != nil {
		t.Fatal(err)
	}
	info, err := DescribeFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	kv := info.Sizes.KV
	want := int64(256+3*48) * int64(kv.Cols) * 2 * 4
	if kv.Layers != 4 || kv.WindowLayers != 3 || kv.WindowSlots != 48 || kv.Bytes != want {
		t.Errorf("kv %+v, want 3 of 4 layers at 48 slots, %d bytes", kv, want)
	}
	if s := info.Sizes; s.Session != kv.Bytes+s.Arenas[1].Bytes {
		t.Errorf("session %d, want the cache %d and the largest arena %d", s.Session, kv.Bytes, s.Arenas[1].Bytes)
	}
	var out strings.Builder
	if err := info.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "3 sliding-window layers x 48 ring slots") {
		t.Errorf("the text does not show the rings:\n%s", out.String())
	}
	e, err := engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.CacheBytes(); got != kv.Bytes {
		t.Errorf("a session allocates %d cache bytes, inspect says %d", got, kv.Bytes)
	}
}

// TestDescribeQ4: the gemma4 fixture compiled with a 4-bit cache takes,
// per position, 2 x (3 sliding layers' rows of a head of 16 + the full
// layer's row of a head of 32) bytes (one key/value head each), its rings
// counted, the text shows the bytes per token, and a session allocates
// what inspect says.
func TestDescribeQ4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gemma4-q4.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/gemma4/model.gguf"), path, compile.Options{ARLens: []int{8}, Ctx: 256, KV: "q4"}); err != nil {
		t.Fatal(err)
	}
	info, err := DescribeFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	kv := info.Sizes.KV
	small, large := int64(kernel.KVQ4RowBytes(16)), int64(kernel.KVQ4RowBytes(32))
	if kv.ElemBytes != 0 || kv.TokenBytes != 2*(3*small+large) || kv.Bytes != 2*(3*48*small+256*large) {
		t.Errorf("kv %+v, want %d bytes per token and %d in all", kv, 2*(3*small+large), 2*(3*48*small+256*large))
	}
	var out strings.Builder
	if err := info.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d bytes (keys and values of every layer)", kv.TokenBytes); !strings.Contains(out.String(), want) {
		t.Errorf("the text does not show %q:\n%s", want, out.String())
	}
	e, err := engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.CacheBytes(); got != kv.Bytes {
		t.Errorf("a session allocates %d cache bytes, inspect says %d", got, kv.Bytes)
	}
}

// TestDescribeStateBudget: the state sets a described session keeps
// follow the state budget, which the sizes and the text show.
func TestDescribeStateBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen35.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/qwen35"), path, compile.Options{ARLens: []int{8}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	def, err := DescribeFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if def.Sizes.StateBudget != engine.DefaultStateBudget {
		t.Errorf("default budget %d", def.Sizes.StateBudget)
	}
	budget := 5*def.Sizes.State + 1
	info, err := DescribeFileWith(path, DescribeOptions{StateBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	s := info.Sizes
	if s.StateSets != 5 || s.StateBudget != budget || s.Session != s.KV.Bytes+s.Arenas[1].Bytes+5*s.State {
		t.Errorf("budget %d: %d sets, budget %d, session %d", budget, s.StateSets, s.StateBudget, s.Session)
	}
	var out strings.Builder
	if err := info.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("x 5 sets (the state cache within its %s budget", Human(budget)); !strings.Contains(out.String(), want) {
		t.Errorf("the text lacks %q:\n%s", want, out.String())
	}
}
