package limits

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckAlloc: a request over what is available is an *AllocError that
// says how much; one under it passes; the machine's own figure refuses an
// exabyte.
func TestCheckAlloc(t *testing.T) {
	err := checkAlloc("a KV cache of 16777216 positions", 20<<30, MemoryBound{"MemAvailable", 8 << 30})
	var ae *AllocError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "20.0 GiB") || !strings.Contains(err.Error(), "8.0 GiB") {
		t.Errorf("over: %v", err)
	}
	if err := checkAlloc("x", 1<<30, MemoryBound{"MemAvailable", 8 << 30}); err != nil {
		t.Errorf("under: %v", err)
	}
	if err := checkAlloc("x", -1, MemoryBound{"MemAvailable", 8 << 30}); err == nil {
		t.Error("a negative (overflowed) size passed")
	}
	if err := CheckAlloc("an exabyte", 1<<60); err == nil {
		t.Error("an exabyte passed")
	}
}

func TestParseMemAvailable(t *testing.T) {
	in := "MemTotal:       16318004 kB\nMemFree:         1000 kB\nMemAvailable:    8159002 kB\n"
	if n, ok := parseMemAvailable(strings.NewReader(in)); !ok || n != 8159002<<10 {
		t.Errorf("got %d %v", n, ok)
	}
	for _, bad := range []string{"", "MemAvailable: x kB\n", "MemAvailable: 12 MB\n"} {
		if _, ok := parseMemAvailable(strings.NewReader(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestMemoryEnvCaps: $AOTLM_MAX_MEMORY lowers what CheckAlloc allows; a
// malformed value is an error naming the variable.
func TestMemoryEnvCaps(t *testing.T) {
	t.Setenv(MemoryEnv, "1M")
	if err := CheckAlloc("two megabytes", 2<<20); err == nil || !strings.Contains(err.Error(), "1.0 MiB") {
		t.Errorf("over the cap: %v", err)
	}
	if err := CheckAlloc("one kilobyte", 1<<10); err != nil {
		t.Errorf("under the cap: %v", err)
	}
	t.Setenv(MemoryEnv, "lots")
	if err := CheckAlloc("x", 1); err == nil || !strings.Contains(err.Error(), MemoryEnv) {
		t.Errorf("malformed: %v", err)
	}
}

// TestMachineCounts: thread and session counts are bounded per CPU, with a
// floor for --parallel on small machines; zero and negative counts are
// refused too.
func TestMachineCounts(t *testing.T) {
	defer func(f func() int) { cpus = f }(cpus)
	cpus = func() int { return 2 }
	if MaxThreads() != 2*MaxThreadsPerCPU || MaxParallel() != MinParallel {
		t.Fatalf("2 CPUs: %d threads, %d parallel", MaxThreads(), MaxParallel())
	}
	for _, n := range []int{1, 2, MaxThreads()} {
		if err := CheckThreads("-t", n); err != nil {
			t.Errorf("-t %d: %v", n, err)
		}
	}
	for _, n := range []int{MaxThreads() + 1, 1 << 40} {
		if err := CheckThreads("-t", n); !IsLimit(err) || !strings.Contains(err.Error(), "-t") || !strings.Contains(err.Error(), "2 CPUs") {
			t.Errorf("-t %d: %v", n, err)
		}
	}
	for _, n := range []int{0, -3} {
		if err := CheckThreads("-t", n); err == nil || IsLimit(err) {
			t.Errorf("-t %d: %v", n, err)
		}
		if err := CheckParallel("--parallel", n); err == nil {
			t.Errorf("--parallel %d: %v", n, err)
		}
	}
	if err := CheckParallel("--parallel", MinParallel); err != nil {
		t.Error(err)
	}
	if err := CheckParallel("--parallel", MinParallel+1); !IsLimit(err) || !strings.Contains(err.Error(), "--parallel") {
		t.Errorf("--parallel %d: %v", MinParallel+1, err)
	}
	cpus = func() int { return 64 }
	if MaxParallel() != 64*MaxParallelPerCPU || MaxThreads() != 64*MaxThreadsPerCPU {
		t.Errorf("64 CPUs: %d threads, %d parallel", MaxThreads(), MaxParallel())
	}
}
