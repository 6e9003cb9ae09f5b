package score

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestParseKV: known storages in the order given; an unknown or repeated
// one is an error naming it.
func TestParseKV(t *testing.T) {
	got, err := ParseKV("f16, q4,u8")
	if err != nil || strings.Join(got, ",") != "f16,q4,u8" {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"f16,q3", "q4,q4", ""} {
		if _, err := ParseKV(bad); err == nil || !strings.Contains(err.Error(), "--kv") {
			t.Errorf("%q: %v, want an error naming --kv", bad, err)
		}
	}
}

// TestKVPhasesArtifact: an artifact cannot be scored with other caches
// (its storage is fixed): the error says so.
func TestKVPhasesArtifact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.aot")
	if err := compile.CompileFile(tinyModel(t), path, compile.Options{Ctx: 64}); err != nil {
		t.Fatal(err)
	}
	_, err := KVPhases(KVOptions{Model: path, KV: []string{"f16", "q4"}, Ctx: 32, Threads: 1}, "text", TextOptions{Ctx: 32})
	if err == nil || !strings.Contains(err.Error(), "artifact") {
		t.Fatalf("an artifact with --kv: %v, want an error naming the artifact", err)
	}
}

// TestKVPhasesTrained scores the trained models of the test data at their
// full context of 512 with a binary16 and the two 4-bit caches (4
// chunks): the binary16 cache against itself has a KL of exactly 0; each
// 4-bit cache's KL divergence and perplexity change stay within the
// bounds below (docs/kvcache.md gives the figures over more chunks).
func TestKVPhasesTrained(t *testing.T) {
	for _, c := range []struct {
		model, text   string
		maxKL, maxPPL float64 // a 4-bit cache's mean KL and perplexity ratio
	}{
		{"models/wp-llama", "text/war-and-peace.txt", 0.03, 1.03},
		{"models/stories260K/stories260K.gguf", "text/TinyStories-valid-excerpt.txt", 0.16, 1.12},
	} {
		text := string(testutil.ReadFile(t, c.text))
		if len(text) > 200_000 {
			text = text[:200_000]
		}
		kv := []string{"f16", "q4", "q4v"}
		res, err := KVPhases(KVOptions{Model: testutil.Path(t, c.model), KV: kv, Ctx: 512, Threads: 2},
			text, TextOptions{Ctx: 512, Chunks: 4})
		if err != nil {
			t.Fatal(err)
		}
		f16 := res[0]
		if f16.KL != 0 || f16.Top1 != 1 {
			t.Errorf("%s: the reference against itself: KL %g, top-1 %g", c.model, f16.KL, f16.Top1)
		}
		for i, q4 := range res[1:] {
			t.Logf("%s: f16 ppl %.4f, %s ppl %.4f (x%.4f), KL %.5f, same top-1 %.2f%%", c.model, f16.PPL, kv[i+1], q4.PPL, q4.PPL/f16.PPL, q4.KL, 100*q4.Top1)
			if !(q4.KL > 0) || q4.KL > c.maxKL || !(q4.PPL/f16.PPL <= c.maxPPL) || math.IsNaN(q4.PPL) {
				t.Errorf("%s: %s cache KL %g (at most %g), perplexity %g against %g (at most x%g)", c.model, kv[i+1], q4.KL, c.maxKL, q4.PPL, f16.PPL, c.maxPPL)
			}
		}
	}
}
