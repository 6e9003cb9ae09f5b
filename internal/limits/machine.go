package limits

import (
	"fmt"
	"runtime"
)

// Counts bounded by the machine.
const (
	// MaxThreadsPerCPU bounds a thread count (-t, Options.Threads): more
	// workers than CPUs only take turns, and each holds scratch memory.
	MaxThreadsPerCPU = 4
	// MaxParallelPerCPU bounds the sessions that generate at once
	// (serve's --parallel): each runs its passes on the shared workers.
	MaxParallelPerCPU = 16
	// MinParallel is the bound of --parallel on a machine with few CPUs.
	MinParallel = 64
)

// cpus is runtime.NumCPU; tests replace it.
var cpus = runtime.NumCPU

// MaxThreads is the largest thread count this machine accepts.
func MaxThreads() int { return MaxThreadsPerCPU * max(cpus(), 1) }

// MaxParallel is the largest number of sessions generating at once this
// machine accepts (the memory budget may allow fewer).
func MaxParallel() int { return max(MaxParallelPerCPU*max(cpus(), 1), MinParallel) }

// CheckThreads refuses a thread count below 1 or above MaxThreads; what
// names it in the error ("-t", "threads").
func CheckThreads(what string, n int) error {
	if n < 1 {
		return fmt.Errorf("%s %d: want at least 1 thread", what, n)
	}
	if m := MaxThreads(); n > m {
		return &Error{What: fmt.Sprintf("%s %d", what, n),
			Limit: fmt.Sprintf("MaxThreads (%d on this machine: %d per CPU, %d CPUs)", m, MaxThreadsPerCPU, max(cpus(), 1))}
	}
	return nil
}

// CheckParallel refuses a number of concurrent sessions below 1 or above
// MaxParallel; what names it in the error ("--parallel").
func CheckParallel(what string, n int) error {
	if n < 1 {
		return fmt.Errorf("%s %d: want at least 1 session", what, n)
	}
	if m := MaxParallel(); n > m {
		return &Error{What: fmt.Sprintf("%s %d", what, n),
			Limit: fmt.Sprintf("MaxParallel (%d on this machine)", m)}
	}
	return nil
}
