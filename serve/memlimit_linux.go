package serve

import "syscall"

// addressSpaceLimit is the process's RLIMIT_AS (ulimit -v) in bytes; 0
// when there is none.
func addressSpaceLimit() int64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil || r.Cur == ^uint64(0) || r.Cur > 1<<60 {
		return 0
	}
	return int64(r.Cur)
}
