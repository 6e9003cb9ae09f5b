package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestThreadAndSessionCountsAreBounded: -t, --jobs and --parallel above
// what the machine bounds end in one line naming the flag and the limit,
// before any model is read; counts within it pass the check.
func TestThreadAndSessionCountsAreBounded(t *testing.T) {
	over := fmt.Sprint(limits.MaxThreads() + 1)
	for _, args := range [][]string{
		{"run", "-p", "x", "-t", over},
		{"run", "-p", "x", "-t", "1000000000"},
		{"chat", "-t", "99999999"},
		{"bench", "-t", over},
		{"ppl", "-t", over},
		{"serve", "-t", over},
		{"serve", "--parallel", fmt.Sprint(limits.MaxParallel() + 1)},
		{"serve", "--parallel", "16000000"},
		{"compile", "missing.gguf", "-o", "x.aot", "--jobs", over},
		{"quantize", "missing", "-o", "x", "--jobs", "1000000"},
	} {
		code, _, stderr := runCLI(t, args...)
		flag := args[len(args)-2]
		if code == 0 || !strings.Contains(stderr, flag) || !strings.Contains(stderr, "exceeds the limit Max") ||
			strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "run", "-p", "Once", "-n", "2", "-t", fmt.Sprint(limits.MaxThreads()), "--quiet"); code != 0 {
		t.Errorf("-t %d: exit %d: %s", limits.MaxThreads(), code, stderr)
	}
}

// TestServeSessionsShareTheMemoryBudget: serve's sessions are checked
// together: with $AOTLM_MAX_MEMORY at a few sessions' worth, --parallel 16
// stops at startup with one line saying what the other sessions hold,
// instead of accepting sessions whose total the machine cannot give.
func TestServeSessionsShareTheMemoryBudget(t *testing.T) {
	model := filepath.Join(t.TempDir(), "s.aot")
	if code, _, stderr := runCLI(t, "compile", testutil.Path(t, "models/stories260K/stories260K.gguf"), "-o", model, "--ctx", "256"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	t.Setenv(limits.MemoryEnv, "1M")
	code, _, stderr := runCLI(t, "serve", "-m", model, "--parallel", "16", "--port", "0")
	if code == 0 || !strings.Contains(stderr, "sessions of this process") || !strings.Contains(stderr, limits.MemoryEnv) ||
		strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if held, n := limits.Reserved(); n != 0 {
		t.Errorf("a failed serve left %d reservations of %d bytes", n, held)
	}
}
