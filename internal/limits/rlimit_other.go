//go:build !(linux || android || darwin || freebsd)

package limits

// addressSpaceLimit: this system has no RLIMIT_AS to read.
func addressSpaceLimit() (int64, bool) { return 0, false }
