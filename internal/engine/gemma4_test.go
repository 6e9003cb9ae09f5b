package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// gemma4RefTol is the README's tolerance for the gemma families against
// llama.cpp (whose GELU goes through an fp16 table).
const gemma4RefTol = 2e-2

// TestGemma4Artifact compiles the gemma4 fixture, from its HF folder and
// from its GGUF, with prefill plans shorter than the prompt (AR-8 and
// AR-16), and checks against llama.cpp: the logits of every position in
// kv mode and in hybrid mode (passes of 8 and 16 rows, in which the
// shared layers read the cache rows their source layer stored in the
// same pass, the last pass padded), the last logits after a prefill in
// two calls split at reference.json's k, and the 16 greedy ids. A batch
// of two sessions decoding together gives what each gives alone.
func TestGemma4Artifact(t *testing.T) {
	checkFixtureFamilyArtifact(t, "gemma4", gemma4RefTol)
}

// TestGemma4DecodeBatch runs checkDecodeBatch on the gemma4 fixture with
// f32, f16 and u8 caches: in a batched pass each shared layer reads its
// source layer's rows from its own session's cache.
func TestGemma4DecodeBatch(t *testing.T) {
	defer engine.SplitEverything()()
	m := loadModel(t, testutil.Path(t, "arch/gemma4"))
	for _, kv := range []string{"f32", "f16", "u8"} {
		e := compileKV(t, m, kv)
		for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
			t.Run(fmt.Sprintf("%s/%v", kv, mode), func(t *testing.T) { checkDecodeBatch(t, e, mode, batchTol) })
		}
	}
}

// TestGemma4EmbedsRefused: a pass with embedding rows in place of ids is
// refused on the gemma4 artifact, whose per-layer embedding table has no
// row for them, with an error rather than a panic.
func TestGemma4EmbedsRefused(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "arch/gemma4"))
	e := compileModel(t, m, 64, 4)
	s := newSession(t, e, engine.SessionOptions{Threads: 2})
	_, err := s.Run(&engine.Pass{IDs: []int{5, -1}, Embeds: make([]float32, 2*m.Config.Hidden)})
	if err == nil || !strings.Contains(err.Error(), "embedding tables") {
		t.Fatalf("embedding rows on gemma4: %v, want an error naming the embedding tables", err)
	}
}
