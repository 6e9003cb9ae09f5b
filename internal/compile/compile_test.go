package compile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

func loadModel(t *testing.T, path string) *arch.Model {
	t.Helper()
	ck, err := detect.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testModels(t *testing.T) map[string]*arch.Model {
	dir := t.TempDir()
	if err := tinymodel.WriteLlama(dir, tinymodel.Default(), 3); err != nil {
		t.Fatal(err)
	}
	return map[string]*arch.Model{
		"stories260K": loadModel(t, testutil.Path(t, "models/stories260K/stories260K.gguf")),
		"tiny":        loadModel(t, dir),
	}
}

// TestArenaReuse checks the arena assignment of real plans directly: no
// two buffers that are live at the same step share a float, and reuse makes
// the arena smaller than the sum of all buffers.
func TestArenaReuse(t *testing.T) {
	for name, m := range testModels(t) {
		g, err := arch.Build(&m.Config, arch.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 4, 32} {
			p, err := Lower(g, n, 64)
			if err != nil {
				t.Fatal(err)
			}
			// live range of buffer b: [written, last read]; the output lives to the end
			first := make([]int, len(p.Buffers))
			last := make([]int, len(p.Buffers))
			for s, st := range p.Steps {
				first[st.Out], last[st.Out] = s, s
				for _, b := range st.In {
					last[b] = s
				}
			}
			last[p.Output] = len(p.Steps)
			sum := 0
			for a := range p.Buffers {
				sum += p.Buffers[a].Size()
				for b := a + 1; b < len(p.Buffers); b++ {
					if first[a] > last[b] || first[b] > last[a] {
						continue // never live together
					}
					x, y := p.Buffers[a], p.Buffers[b]
					if x.Offset < y.Offset+y.Size() && y.Offset < x.Offset+x.Size() {
						t.Fatalf("%s AR-%d: live buffers %d and %d overlap", name, n, a, b)
					}
				}
			}
			if p.Arena >= sum {
				t.Fatalf("%s AR-%d: arena %d floats is not below the %d of all buffers", name, n, p.Arena, sum)
			}
			t.Logf("%s AR-%d: %d steps, arena %d floats, buffers sum %d (%.1f%%)",
				name, n, len(p.Steps), p.Arena, sum, 100*float64(p.Arena)/float64(sum))
		}
	}
}

// TestAllocatorRandom runs random lifetimes through the allocator and
// checks that live ranges never overlap and stay aligned.
func TestAllocatorRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type live struct{ off, n int }
	for trial := 0; trial < 200; trial++ {
		var a allocator
		var lv []live
		for op := 0; op < 100; op++ {
			if len(lv) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(lv))
				a.free(lv[i].off, lv[i].n)
				lv = append(lv[:i], lv[i+1:]...)
				continue
			}
			n := 1 + r.IntN(300)
			off := a.alloc(n)
			if off%arenaAlign != 0 || off+n > a.top {
				t.Fatalf("alloc %d at %d, top %d", n, off, a.top)
			}
			for _, l := range lv {
				if off < l.off+l.n && l.off < off+n {
					t.Fatalf("trial %d: [%d,%d) overlaps live [%d,%d)", trial, off, off+n, l.off, l.off+l.n)
				}
			}
			lv = append(lv, live{off, n})
		}
	}
}

// TestCompileArtifact compiles a model and checks what the artifact holds:
// every weight once, one valid plan per AR length, the manifest fields.
func TestCompileArtifact(t *testing.T) {
	m := testModels(t)["stories260K"]
	path := filepath.Join(t.TempDir(), "m.aot")
	tok := testutil.ReadFile(t, "llama2c/tok512-dratman/tok512.bin")
	src := Source{Tokenizer: &tokenizer.Stored{Kind: "llama2c", Data: tok}, Provenance: map[string]any{"file": "x"}}
	if err := CompileModel(m, src, Options{ARLens: []int{8, 4, 8}, Ctx: 64}, path); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.Open(path, artifact.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var man plan.Manifest
	if err := a.Manifest(&man); err != nil {
		t.Fatal(err)
	}
	if err := man.Validate(); err != nil {
		t.Fatal(err)
	}
	if man.Architecture != "llama" || man.Vocab != 512 || man.Ctx != 64 || man.BOS != m.Config.BOS || man.Weights != LayoutF32 {
		t.Fatalf("manifest %+v", man)
	}
	var lens []int
	for _, r := range man.Plans {
		lens = append(lens, r.ARLen)
		b, err := a.Blob(r.Blob)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if p.Rows != r.ARLen || p.KV.Layers != m.Config.Layers || p.KV.Ctx != 64 {
			t.Fatalf("plan %s: rows %d kv %+v", r.Blob, p.Rows, p.KV)
		}
	}
	if !sort.IntsAreSorted(lens) || len(lens) != 3 || lens[0] != 1 || lens[1] != 4 || lens[2] != 8 {
		t.Fatalf("AR lengths %v, want [1 4 8]", lens)
	}
	ts := a.Tensors()
	if len(ts) != len(m.Weights) {
		t.Fatalf("%d tensors stored, the model has %d weights", len(ts), len(m.Weights))
	}
	for _, ti := range ts {
		if int64(len(m.Weights[ti.Name]))*4 != ti.Size {
			t.Fatalf("tensor %s: %d bytes for %d weights", ti.Name, ti.Size, len(m.Weights[ti.Name]))
		}
	}
	if man.Tokenizer == nil || man.Tokenizer.Kind != "llama2c" {
		t.Fatalf("tokenizer %+v", man.Tokenizer)
	}
	if b, err := a.Blob(man.Tokenizer.Blob); err != nil || !bytes.Equal(b, tok) {
		t.Fatalf("tokenizer blob %q, %v", b, err)
	}
}

func TestCompileRefuses(t *testing.T) {
	m := testModels(t)["tiny"]
	dir := t.TempDir()
	for name, o := range map[string]Options{
		"AR length beyond context": {ARLens: []int{64}, Ctx: 32},
		"zero AR length":           {ARLens: []int{0}, Ctx: 32},
	} {
		if err := CompileModel(m, Source{}, o, filepath.Join(dir, "x.aot")); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	delete(m.Weights, "model.norm.weight")
	if err := CompileModel(m, Source{}, Options{Ctx: 16}, filepath.Join(dir, "y.aot")); err == nil {
		t.Error("missing weight accepted")
	}
}

// TestCompileFileStoresTokenizer compiles real checkpoints from their
// paths: the GGUF's embedded tokenizer metadata, or the llama2.c
// tokenizer named with Options.Tokenizer, must be stored.
func TestCompileFileStoresTokenizer(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ model, tok, kind string }{
		{"models/stories260K/stories260K.gguf", "", "gguf-metadata"},
		{"llama2c/stories260K.bin", "llama2c/tok512-dratman/tok512.bin", "llama2c"},
	} {
		opts := Options{ARLens: []int{4}, Ctx: 32}
		if c.tok != "" {
			opts.Tokenizer = testutil.Path(t, c.tok)
		}
		out := filepath.Join(dir, c.kind+".aot")
		if err := CompileFile(testutil.Path(t, c.model), out, opts); err != nil {
			t.Fatal(err)
		}
		a, err := artifact.Open(out, artifact.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var man plan.Manifest
		if err := a.Manifest(&man); err != nil {
			t.Fatal(err)
		}
		if man.Tokenizer == nil || man.Tokenizer.Kind != c.kind {
			t.Fatalf("%s: tokenizer %+v, want kind %s", c.model, man.Tokenizer, c.kind)
		}
		b, err := a.Blob(man.Tokenizer.Blob)
		if err != nil || len(b) < 1000 {
			t.Fatalf("%s: tokenizer blob of %d bytes, %v", c.model, len(b), err)
		}
		a.Close()
	}
}

// TestCompileRefusesAnUnbuildableTokenizer: a tokenizer blob the runtime
// cannot rebuild is refused at compile time, not stored in the artifact.
func TestCompileRefusesAnUnbuildableTokenizer(t *testing.T) {
	m := testModels(t)["stories260K"]
	path := filepath.Join(t.TempDir(), "m.aot")
	src := Source{Tokenizer: &tokenizer.Stored{Kind: "llama2c", Data: []byte("tok")}}
	if err := CompileModel(m, src, Options{Ctx: 64}, path); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("an artifact was written")
	}
}

// TestCompileKVQ4Heads: a model whose attention heads are not a power of
// two (12 values) is refused a 4-bit cache, with an error naming the
// storage and the head dimension; the binary16 cache compiles.
func TestCompileKVQ4Heads(t *testing.T) {
	dir := t.TempDir()
	cfg := tinymodel.Config{HiddenSize: 48, IntermediateSize: 64, NumLayers: 1, NumHeads: 4, NumKVHeads: 2, VocabSize: 64, MaxPositions: 32}
	if err := tinymodel.WriteLlama(dir, cfg, 1); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, dir)
	for _, kv := range []string{"q4", "q4v"} {
		err := CompileModel(m, Source{}, Options{Ctx: 32, KV: kv}, filepath.Join(t.TempDir(), "m.aot"))
		if err == nil || !strings.Contains(err.Error(), "--kv "+kv) || !strings.Contains(err.Error(), "not 12") {
			t.Errorf("--kv %s with heads of 12: %v, want an error naming it and the head dimension", kv, err)
		}
	}
	if err := CompileModel(m, Source{}, Options{Ctx: 32, KV: "f16"}, filepath.Join(t.TempDir(), "m.aot")); err != nil {
		t.Fatal(err)
	}
}
