//go:build unix

package bench

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time (user and system) this process has used,
// 0 when unknown.
func CPUTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
