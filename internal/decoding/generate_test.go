package decoding

import (
	"errors"
	"slices"
	"testing"
)

// countSession returns logits favouring (last id + 1) mod V, so greedy
// generation counts upwards from the last prompt id.
type countSession struct {
	pos, ctx, vocab int
	logits          []float32
	calls           int
}

func (s *countSession) next(id int) []float32 {
	clear(s.logits)
	s.logits[(id+1)%s.vocab] = 1
	return s.logits
}

func (s *countSession) Prefill(ids []int) ([]float32, error) {
	if s.pos+len(ids) > s.ctx {
		return nil, errors.New("full")
	}
	s.pos += len(ids)
	return s.next(ids[len(ids)-1]), nil
}

func (s *countSession) Decode(id int) ([]float32, error) {
	if s.pos >= s.ctx {
		return nil, errors.New("full")
	}
	s.calls++
	s.pos++
	return s.next(id), nil
}
func (s *countSession) Pos() int     { return s.pos }
func (s *countSession) Context() int { return s.ctx }

func newCount(ctx int) *countSession {
	return &countSession{ctx: ctx, vocab: 10, logits: make([]float32, 10)}
}

func TestGenerateStops(t *testing.T) {
	s := newCount(100)
	res, err := Generate(s, []int{1, 2}, Options{MaxTokens: 4})
	if err != nil || res.StopReason != StopLength || !slices.Equal(res.IDs, []int{3, 4, 5, 6}) {
		t.Fatalf("length: %v %v %v", res.IDs, res.StopReason, err)
	}
	if s.calls != 3 {
		t.Fatalf("%d decode passes for 4 ids, want 3", s.calls)
	}
	res, err = Generate(newCount(100), []int{5}, Options{MaxTokens: 10, Stop: []int{8}})
	if err != nil || res.StopReason != StopEOS || !slices.Equal(res.IDs, []int{6, 7}) {
		t.Fatalf("eos: %v %v %v", res.IDs, res.StopReason, err)
	}
	res, err = Generate(newCount(5), []int{0, 0}, Options{})
	if err != nil || res.StopReason != StopContext || len(res.IDs) != 4 {
		t.Fatalf("context: %v %v %v", res.IDs, res.StopReason, err)
	}
}

func TestGeneratePromptTooLong(t *testing.T) {
	_, err := Generate(newCount(3), []int{1, 2, 3, 4}, Options{})
	if !errors.Is(err, ErrPromptTooLong) {
		t.Fatalf("got %v", err)
	}
	if _, err := Generate(newCount(3), nil, Options{}); err == nil {
		t.Fatal("empty prompt accepted")
	}
}

func TestGenerateCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	res, err := Generate(newCount(100), []int{1}, Options{OnToken: func(int) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, stop) || len(res.IDs) != 2 {
		t.Fatalf("%v %v", res.IDs, err)
	}
}
