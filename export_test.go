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
