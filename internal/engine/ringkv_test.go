package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGemma4WindowRing: on the gemma4 fixture (sliding window 8, a prompt
// of more than 40 tokens) compiled with AR-8 for 256 positions, a session
// whose six sliding-window layers keep rings of 8+2*8 positions gives
// every prompt position's logits and then 24 decode steps (well past the
// ring's wrap) bit-identical to a session that keeps every position
// (SessionOptions.FullWindowKV), with f32, f16, u8 and q4 caches, in hybrid
// and kv modes; its logits match llama.cpp's within the fixture
// tolerance; its cache is smaller; a rewind a pass back works and
// continues identically, while one past the ring fails with an error
// (and works with the full cache).
func TestGemma4WindowRing(t *testing.T) {
	ref := readFixtureFamilyRef(t, "gemma4")
	m := loadModel(t, testutil.Path(t, "arch/gemma4"))
	const ctx = 256
	for _, kv := range []string{"f32", "f16", "u8", "q4"} {
		path := filepath.Join(t.TempDir(), kv+".aot")
		if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: ctx, KV: kv}, path); err != nil {
			t.Fatal(err)
		}
		e, err := engine.OpenWith(path, engine.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
			t.Run(fmt.Sprintf("%s/%v", kv, mode), func(t *testing.T) {
				ring := newSession(t, e, engine.SessionOptions{Mode: mode, Threads: 2})
				full := newSession(t, e, engine.SessionOptions{Mode: mode, Threads: 2, FullWindowKV: true})
				// 4 cache layers (layers 4-7 share those of 2 and 3) of 32
				// columns: 3 sliding ones of 2*(8+2*8) slots and the full
				// one of 256 against 4 of 256
				rb, fb := ring.CacheBytes(), full.CacheBytes()
				t.Logf("cache: %d bytes with rings, %d with every position", rb, fb)
				wantBytes := fb * (3*48 + 256) / (4 * 256)
				if kv == "q4" { // rows of a head's bytes: the sliding layers' heads of 16, the full one's of 32
					wantBytes = 2 * int64(3*48*kernel.KVQ4RowBytes(16)+256*kernel.KVQ4RowBytes(32))
				}
				if rb != wantBytes {
					t.Fatalf("the ring cache takes %d bytes, want %d (the full one takes %d)", rb, wantBytes, fb)
				}
				got := prefillAll(t, ring, ref.Tokens)
				want := prefillAll(t, full, ref.Tokens)
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("position %d: logits differ from the full cache's by %g", i, maxDiff(got[i], want[i]))
					}
					if d := maxDiff(got[i], ref.Logits[i]); kv == "f32" && d > gemma4RefTol {
						t.Fatalf("position %d: logits differ from llama.cpp's by %g", i, d)
					}
				}
				decodeSame(t, ring, full, argmax(got[len(got)-1]), 24)

				// a rewind of one pass: kept; continues as the full cache does
				back := ring.Pos() - 8
				for _, s := range []*engine.Session{ring, full} {
					if err := s.Rewind(back); err != nil {
						t.Fatalf("rewind to %d: %v", back, err)
					}
				}
				decodeSame(t, ring, full, 7, 12)

				// far back: the ring no longer holds those positions
				err := ring.Rewind(5)
				if err == nil || !strings.Contains(err.Error(), "sliding-window") {
					t.Fatalf("rewind to 5 past the ring: %v, want an error naming the sliding-window layers", err)
				}
				if err := full.Rewind(5); err != nil {
					t.Fatalf("the full cache rewinds to 5: %v", err)
				}
				ring.Reset()
				if _, err := ring.Prefill(ref.Tokens[:5]); err != nil {
					t.Fatal(err)
				}
				decodeSame(t, ring, full, ref.Tokens[5], 4)
			})
		}
	}
}

// prefillAll returns the logits of every position of ids fed to s.
func prefillAll(t *testing.T, s *engine.Session, ids []int) [][]float32 {
	t.Helper()
	out, err := s.PrefillAll(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeSame decodes n greedy steps from id on both sessions and fails
// unless their logits are bit-identical at every step.
func decodeSame(t *testing.T, a, b *engine.Session, id, n int) {
	t.Helper()
	for step := range n {
		la, err := a.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		la = slices.Clone(la)
		lb, err := b.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(la, lb) {
			t.Fatalf("decode step %d at position %d: logits differ by %g", step, a.Pos()-1, maxDiff(la, lb))
		}
		id = argmax(la)
	}
}
