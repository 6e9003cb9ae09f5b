//go:build !unix

package bench

import "time"

// CPUTime returns 0: process CPU time is not read on this system.
func CPUTime() time.Duration { return 0 }
