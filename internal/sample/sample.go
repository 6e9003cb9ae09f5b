package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/aotlm/aotlm/internal/kernel"
)

// Params configures a Sampler. The zero value is greedy decoding.
type Params struct {
	Temperature   float32 // <= 0: greedy (argmax, lowest id on ties)
	TopK          int     // keep the K most likely; <= 0: all
	TopP          float32 // keep the smallest set with mass >= P; 0 or >= 1: all
	MinP          float32 // drop tokens below MinP * p(best); 0: off
	RepeatPenalty float32 // > 1 penalizes ids in the recent history; 0 or 1: off
	RepeatLastN   int     // history length the penalty looks at (0: 64)
	// PresencePenalty is subtracted once from the logit of every id in
	// the history, FrequencyPenalty once per occurrence (OpenAI's
	// presence_penalty and frequency_penalty); 0: off.
	PresencePenalty  float32
	FrequencyPenalty float32
	Seed             uint64
}

// Validate reports parameters outside their ranges.
func (p Params) Validate() error {
	switch {
	case !(p.Temperature >= 0) || math.IsInf(float64(p.Temperature), 0):
		return fmt.Errorf("temperature %v must be finite and >= 0", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("top-k %d must be >= 0", p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("top-p %v must be in [0, 1]", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("min-p %v must be in [0, 1]", p.MinP)
	case !(p.RepeatPenalty >= 0) || math.IsInf(float64(p.RepeatPenalty), 0):
		return fmt.Errorf("repeat penalty %v must be finite and >= 0", p.RepeatPenalty)
	case p.RepeatLastN < 0:
		return fmt.Errorf("repeat history length %d must be >= 0", p.RepeatLastN)
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return fmt.Errorf("presence penalty %v must be in [-2, 2]", p.PresencePenalty)
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return fmt.Errorf("frequency penalty %v must be in [-2, 2]", p.FrequencyPenalty)
	}
	return nil
}

type cand struct {
	id int
	p  float32
}

// Sampler draws token ids; it is not safe for concurrent use.
type Sampler struct {
	p     Params
	rng   *rand.Rand
	cands []cand
	adj   []float32
	seen  map[int]int // counts of history ids, for the presence and frequency penalties
}

// New returns a sampler seeded with p.Seed.
func New(p Params) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Argmax returns the index of the largest logit (the lowest on ties).
func Argmax(logits []float32) int { return kernel.Argmax(logits) }

// Sample returns the next id for logits given the ids generated so far
// (history is only read, for the repetition, presence and frequency
// penalties).
func (s *Sampler) Sample(logits []float32, history []int) int {
	c, greedy := s.candidates(logits, history)
	if c == nil {
		return greedy
	}
	var total float64
	for _, x := range c {
		total += float64(x.p)
	}
	r := s.rng.Float64() * total
	for _, x := range c {
		r -= float64(x.p)
		if r < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// candidates returns the ids Sample draws from with their (unnormalized)
// probabilities, or nil and the argmax when decoding is greedy.
func (s *Sampler) candidates(logits []float32, history []int) ([]cand, int) {
	l := logits
	if s.p.RepeatPenalty > 0 && s.p.RepeatPenalty != 1 && len(history) > 0 {
		if cap(s.adj) < len(logits) {
			s.adj = make([]float32, len(logits))
		}
		l = s.adj[:len(logits)]
		copy(l, logits)
		n := s.p.RepeatLastN
		if n <= 0 {
			n = 64
		}
		for _, id := range history[max(0, len(history)-n):] {
			if id >= 0 && id < len(l) {
				if l[id] > 0 {
					l[id] /= s.p.RepeatPenalty
				} else {
					l[id] *= s.p.RepeatPenalty
				}
			}
		}
	}
	if (s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0) && len(history) > 0 {
		if &l[0] == &logits[0] {
			if cap(s.adj) < len(logits) {
				s.adj = make([]float32, len(logits))
			}
			l = s.adj[:len(logits)]
			copy(l, logits)
		}
		if s.seen == nil {
			s.seen = make(map[int]int)
		}
		clear(s.seen)
		for _, id := range history {
			if id >= 0 && id < len(l) {
				s.seen[id]++
			}
		}
		for id, n := range s.seen {
			l[id] -= s.p.PresencePenalty + float32(n)*s.p.FrequencyPenalty
		}
	}
	if s.p.Temperature <= 0 {
		return nil, Argmax(l)
	}
	// softmax at temperature, as probabilities
	mx := l[Argmax(l)]
	if cap(s.cands) < len(l) {
		s.cands = make([]cand, len(l))
	}
	c := s.cands[:len(l)]
	var sum float64
	for i, v := range l {
		e := math.Exp(float64((v - mx) / s.p.Temperature))
		c[i] = cand{i, float32(e)}
		sum += e
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
	if s.p.TopK > 0 || (s.p.TopP > 0 && s.p.TopP < 1) || s.p.MinP > 0 {
		if s.p.TopK > 0 && s.p.TopK < len(c) {
			c = selectTop(c, s.p.TopK) // O(V log K) instead of sorting V
		}
		slices.SortFunc(c, byProbability)
		if s.p.MinP > 0 {
			floor := s.p.MinP * c[0].p
			n := 1
			for n < len(c) && c[n].p >= floor {
				n++
			}
			c = c[:n]
		}
		if s.p.TopP > 0 && s.p.TopP < 1 {
			var mass float32
			var total float32
			for _, x := range c {
				total += x.p
			}
			n := 0
			for n < len(c) {
				mass += c[n].p
				n++
				if mass >= s.p.TopP*total {
					break
				}
			}
			c = c[:n]
		}
	}
	return c, 0
}

// byProbability orders candidates by falling probability, then rising id.
func byProbability(a, b cand) int {
	switch {
	case a.p > b.p:
		return -1
	case a.p < b.p:
		return 1
	}
	return a.id - b.id
}

// selectTop moves the k best candidates (by byProbability) to the front of
// c, in no particular order, and returns them. It keeps a min-heap of the
// best k seen so far, so the cost is O(len(c) log k) and nothing is
// allocated.
func selectTop(c []cand, k int) []cand {
	h := c[:k]
	// heapify: the root is the worst of the k kept
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for i := k; i < len(c); i++ {
		if byProbability(c[i], h[0]) < 0 { // c[i] is better than the worst kept
			h[0], c[i] = c[i], h[0]
			siftDown(h, 0)
		}
	}
	return h
}

// siftDown restores the heap property (worst candidate at the root) below i.
func siftDown(h []cand, i int) {
	for {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && byProbability(h[l], h[worst]) > 0 {
			worst = l
		}
		if r < len(h) && byProbability(h[r], h[worst]) > 0 {
			worst = r
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}
