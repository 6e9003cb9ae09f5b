package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestStateBudgetFlag: `inspect --state-budget` shows the state sets a
// session keeps within that budget (the qwen35 fixture's (its GGUF, which has a vocabulary) 33792-byte
// state: 3 in 100K, the most 17 by default), `run` with a budget
// generates, and run, chat, serve and inspect refuse a budget that is
// not a size.
func TestStateBudgetFlag(t *testing.T) {
	aot := filepath.Join(t.TempDir(), "qwen35.aot")
	if code, _, stderr := runCLI(t, "compile", testutil.Path(t, "arch/qwen35/model.gguf"), "-o", aot, "--ar-len", "8", "--ctx", "64"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	for budget, want := range map[string]string{"": "x 17 sets (the state cache within its 128.00 MiB budget", "100K": "x 3 sets (the state cache within its 100.00 KiB budget"} {
		args := []string{"inspect", aot}
		if budget != "" {
			args = append(args, "--state-budget", budget)
		}
		code, out, stderr := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("inspect --state-budget %q: exit %d, want %q in:\n%s%s", budget, code, want, out, stderr)
		}
	}
	if code, out, stderr := runCLI(t, "run", "-m", aot, "-p", "hello there", "-n", "3", "--temp", "0", "--state-budget", "100K", "--json"); code != 0 || !strings.Contains(out, "\"ids\"") {
		t.Errorf("run --state-budget 100K: exit %d: %s%s", code, out, stderr)
	}
	for _, cmd := range [][]string{{"inspect", aot}, {"run", "-m", aot, "-p", "hi"}, {"chat", "-m", aot}, {"serve", "-m", aot}} {
		code, _, stderr := runCLI(t, append(cmd, "--state-budget", "lots")...)
		if code == 0 || !strings.Contains(stderr, "--state-budget") {
			t.Errorf("%s --state-budget lots: exit %d: %s", cmd[0], code, stderr)
		}
	}
}
