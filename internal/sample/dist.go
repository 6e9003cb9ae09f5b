package sample

// Greedy reports whether the sampler takes the argmax.
func (s *Sampler) Greedy() bool { return s.p.Temperature <= 0 }

// Probs writes into dst (of len(logits)) the distribution Sample draws
// from for logits and history: the kept candidates' probabilities,
// normalized, and zero elsewhere; one-hot at the argmax when greedy.
func (s *Sampler) Probs(dst, logits []float32, history []int) []float32 {
	dst = dst[:len(logits)]
	clear(dst)
	c, greedy := s.candidates(logits, history)
	if c == nil {
		dst[greedy] = 1
		return dst
	}
	var total float64
	for _, x := range c {
		total += float64(x.p)
	}
	for _, x := range c {
		dst[x.id] = float32(float64(x.p) / total)
	}
	return dst
}

// Float64 returns a uniform number in [0, 1) from the sampler's stream.
func (s *Sampler) Float64() float64 { return s.rng.Float64() }

// Draw returns an index drawn with probability proportional to w
// (non-negative weights) from the sampler's stream; the last index of
// positive weight when rounding leaves the draw past the end, and -1 when
// no weight is positive.
func (s *Sampler) Draw(w []float32) int {
	var total float64
	last := -1
	for i, x := range w {
		if x > 0 {
			total += float64(x)
			last = i
		}
	}
	if last < 0 {
		return -1
	}
	r := s.rng.Float64() * total
	for i, x := range w {
		if x > 0 {
			r -= float64(x)
			if r < 0 {
				return i
			}
		}
	}
	return last
}
