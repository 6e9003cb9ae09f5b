//go:build !unix

package bench

import "time"

// cpuTime returns 0: process CPU time is not read on this system.
func cpuTime() time.Duration { return 0 }
