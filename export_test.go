package aotlm

import "time"

// SetGatherTime sets how long a batched decode pass waits at least for
// the sessions that have not yet asked for their next token, until the
// returned function restores it.
func SetGatherTime(d time.Duration) (restore func()) {
	old := minGather
	minGather = d
	return func() { minGather = old }
}

// RotaryPositions exposes rotaryPositions.
func RotaryPositions(ids []int, emb *Embeds, next, P int) ([]int, error) {
	return rotaryPositions(ids, emb, next, P)
}

// BlockStart exposes Embeds.blockStart.
func (e *Embeds) BlockStart(ids []int, at int) int { return e.blockStart(ids, at) }
