//go:build !linux

package serve

// addressSpaceLimit is 0 where RLIMIT_AS is not read.
func addressSpaceLimit() int64 { return 0 }
