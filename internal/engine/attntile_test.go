package engine_test

import (
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestPrefillSameBitsAsDecode: over a binary16 or a uint8 cache, a prompt
// prefilled in passes of 8 rows (attention tiles of four rows of a head)
// gives bit for bit the logits of the same prompt decoded one token at a
// time (tiles of the heads that share a key/value head), and both the
// logits of each later decode step. Rows of a pass and heads of a step
// attend in tiles, one row alone; a tile's every output must be the one
// its item gets alone. stories260K (group of 2 heads), and the qwen3 and
// gemma3 fixtures (gemma3's sliding window of 8 gives rows different
// first slots).
func TestPrefillSameBitsAsDecode(t *testing.T) {
	models := map[string]*arch.Model{"stories260K": storiesModel(t)}
	for _, name := range []string{"qwen3", "gemma3"} {
		models[name] = loadModel(t, testutil.Path(t, "arch/"+name))
	}
	for name, m := range models {
		for _, kv := range []string{"f16", "u8"} {
			checkPrefillSameBits(t, name+"/"+kv, compileKV(t, m, kv))
		}
	}
}

// TestPrefillLongPassSameBitsAsDecode: with 4-bit weights, a prompt of 21
// tokens prefilled in one pass of 32 rows (the 4-bit products of 12 rows
// or more run on other tiles than one token's) gives bit for bit the
// logits of the same prompt decoded one token at a time, and so do the
// decode steps after it, where every kernel overlay in use gives a token
// the same bits in a batch as alone (kernel.Overlay.BatchExact: amd64,
// and the generic kernels); elsewhere (arm64's tiles add in another
// order) the logits agree within batchTol. stories260K quantized with
// w4a16-lpbq.
func TestPrefillLongPassSameBitsAsDecode(t *testing.T) {
	same := sameBits
	for _, o := range kernel.Overlays() {
		if o.Supported && !o.BatchExact {
			t.Logf("overlay %s is not BatchExact: logits compared within %g", o.Name, batchTol)
			same = func(t *testing.T, model, what string, a, b []float32) {
				t.Helper()
				if d := relDiff(a, b); d > batchTol {
					t.Fatalf("%s %s: prefilled whole and one token at a time differ by %g (relative), above %g", model, what, d, batchTol)
				}
			}
		}
	}
	src := quantizeStories(t, "w4a16-lpbq")
	for _, kv := range []string{"f32", "f16"} {
		e, _ := compilePath(t, src, compile.Options{ARLens: []int{32}, Ctx: 64, KV: kv})
		checkPrefillMatches(t, "stories260K-w4/"+kv, e, same)
	}
}

func checkPrefillSameBits(t *testing.T, name string, e *engine.Engine) {
	checkPrefillMatches(t, name, e, sameBits)
}

// checkPrefillMatches compares, with same, a prompt's logits prefilled
// whole and one token at a time, and the decode steps after each.
func checkPrefillMatches(t *testing.T, name string, e *engine.Engine, same func(t *testing.T, model, what string, a, b []float32)) {
	vocab := e.Manifest().Vocab
	prompt := make([]int, 21)
	for i := range prompt {
		prompt[i] = (i*37 + 11) % vocab
	}
	for _, threads := range []int{1, 2} {
		whole := newSession(t, e, engine.SessionOptions{Threads: threads})
		steps := newSession(t, e, engine.SessionOptions{Threads: threads})
		a, err := whole.Prefill(prompt)
		if err != nil {
			t.Fatal(err)
		}
		var b []float32
		for _, id := range prompt {
			if b, err = steps.Prefill([]int{id}); err != nil {
				t.Fatal(err)
			}
		}
		same(t, name, "prompt", a, b)
		for i, id := range []int{3, 9, 1} {
			id %= vocab
			if a, err = whole.Decode(id); err != nil {
				t.Fatal(err)
			}
			if b, err = steps.Decode(id); err != nil {
				t.Fatal(err)
			}
			same(t, name, "decode step "+string(rune('0'+i)), a, b)
		}
	}
}

func sameBits(t *testing.T, model, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s %s: %d logits against %d", model, what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s %s: logit %d is %v prefilled whole, %v one token at a time", model, what, i, a[i], b[i])
		}
	}
}
