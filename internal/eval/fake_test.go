package eval

import (
	"errors"
	"math"
)

// peakSession is a fake model over a vocabulary of V ids: after input id x
// it gives logit w(x) to next(x) and 0 to every other id, so
// p(next(x) | x) = e^w / (e^w + V - 1). A nil next puts the peak nowhere
// (uniform rows). It records every window it is given.
type peakSession struct {
	V     int
	next  func(x int) int
	w     func(x int) float64
	ctx   int // Context(); 0: no limit
	calls [][]int
	reset int  // Reset calls since the last Logits
	dirty bool // Logits ran without a Reset before it
	err   error
}

func (s *peakSession) Reset() { s.reset++ }

func (s *peakSession) Logits(ids []int) ([][]float32, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.reset == 0 {
		s.dirty = true
	}
	s.reset = 0
	s.calls = append(s.calls, append([]int(nil), ids...))
	rows := make([][]float32, len(ids))
	for i, x := range ids {
		row := make([]float32, s.V)
		if s.next != nil {
			row[s.next(x)] = float32(s.w(x))
		}
		rows[i] = row
	}
	return rows, nil
}

// ctxSession adds a context limit to peakSession.
type ctxSession struct{ *peakSession }

func (s ctxSession) Context() int { return s.ctx }

// peakNLL is -log p of the peak token for logit w over V ids, in float64
// from the float32 logit the fake stores.
func peakNLL(w float64, V int) float64 {
	f := float64(float32(w))
	return math.Log(math.Exp(f)+float64(V-1)) - f
}

// peakLogit is the logit that gives the peak probability p over V ids.
func peakLogit(p float64, V int) float64 { return math.Log(p * float64(V-1) / (1 - p)) }

var errFake = errors.New("fake model failure")
