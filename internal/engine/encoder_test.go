package engine_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil/embedgemma"
)

// TestEncoderParity: a text encoder (the EmbeddingGemma fixture:
// bidirectional attention, symmetric window 8, dense projections)
// compiled with AR-4 and context 32 gives, for a sequence of 23 ids run
// in one pass, the interpreter's rows: its last hidden row times the
// tied embeddings equals the interpreter's logits of that row within
// 1e-4 relative. Its sessions refuse the passes of generation
// (ErrEncoder), a sequence that does not start at position 0 and one
// longer than the context.
func TestEncoderParity(t *testing.T) {
	p := filepath.Join(t.TempDir(), "eg.gguf")
	embedgemma.WriteGGUF(t, p)
	m := loadModel(t, p)
	e := compileModel(t, m, 32, 4)
	if !e.Encoder() || e.HiddenWidth() != embedgemma.Hidden {
		t.Fatalf("encoder %v, hidden width %d", e.Encoder(), e.HiddenWidth())
	}
	ids := make([]int, 23)
	for i := range ids {
		ids[i] = 3 + (i*37)%400
	}
	want, _, err := interpreter(t, m).Run(interpreter(t, m).NewState(32), ids)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession(engine.SessionOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var last []float32
	if err := s.PrefillHidden(context.Background(), ids, func(pos int, row []float32) error {
		if pos == len(ids)-1 {
			last = append([]float32(nil), row...)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	emb := m.Weights["model.embed_tokens.weight"]
	D := len(last)
	var worst, scale float64
	for j := range want {
		var got float64
		for d := range D {
			got += float64(last[d]) * float64(emb[j*D+d])
		}
		worst = max(worst, math.Abs(got-float64(want[j])))
		scale = max(scale, math.Abs(float64(want[j])))
	}
	t.Logf("largest logit difference %.3g, largest logit %.3g", worst, scale)
	if worst > 1e-4*scale {
		t.Errorf("logits of the last hidden row differ from the interpreter's by %.3g (largest %.3g)", worst, scale)
	}
	if err := s.PrefillHidden(context.Background(), ids[:3], func(int, []float32) error { return nil }); err == nil {
		t.Error("a sequence at position 23 was encoded")
	}
	s.Reset()
	if err := s.PrefillHidden(context.Background(), make([]int, 33), func(int, []float32) error { return nil }); err == nil {
		t.Error("33 ids encoded in a context of 32")
	}
	if _, err := s.Prefill(ids); !errors.Is(err, engine.ErrEncoder) {
		t.Errorf("Prefill: %v", err)
	}
	if _, err := s.Decode(ids[0]); !errors.Is(err, engine.ErrEncoder) {
		t.Errorf("Decode: %v", err)
	}
	if _, err := s.PrefillAll(context.Background(), ids); !errors.Is(err, engine.ErrEncoder) {
		t.Errorf("PrefillAll: %v", err)
	}
	if _, err := s.Run(&engine.Pass{IDs: ids[:2]}); !errors.Is(err, engine.ErrEncoder) {
		t.Errorf("Run: %v", err)
	}
	if _, err := e.DecodeBatch([]*engine.Session{s}, ids[:1]); !errors.Is(err, engine.ErrEncoder) {
		t.Errorf("DecodeBatch: %v", err)
	}
}
