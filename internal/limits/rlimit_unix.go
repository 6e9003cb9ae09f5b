//go:build linux || android || darwin || freebsd

package limits

import "syscall"

// addressSpaceLimit reads RLIMIT_AS (ulimit -v); false when unlimited.
func addressSpaceLimit() (int64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil {
		return 0, false
	}
	if r.Cur >= 1<<62 { // RLIM_INFINITY is all ones
		return 0, false
	}
	return int64(r.Cur), true
}
