package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestRunAndBenchBeyondCompiledContext runs an artifact of stories260K
// compiled for 64 positions with --ctx 200: run's greedy 150 tokens equal
// those of the model compiled for 200, bench measures a 150-token prompt
// (refused without --ctx), and a --ctx beyond the trained 2048 is
// refused naming both numbers.
func TestRunAndBenchBeyondCompiledContext(t *testing.T) {
	short := compileStories(t) // 64 positions
	full := filepath.Join(t.TempDir(), "full.aot")
	if code, _, stderr := runCLI(t, "compile", testutil.Path(t, "models/stories260K/stories260K.gguf"),
		"-o", full, "--ar-len", "4", "--ctx", "200"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	ids := func(path string) []int {
		code, stdout, stderr := runCLI(t, "run", "-m", path, "--ctx", "200", "-p", "Once upon a time",
			"-n", "150", "--temp", "0", "--json", "--ignore-eos")
		if code != 0 {
			t.Fatalf("run %s: exit %d: %s", filepath.Base(path), code, stderr)
		}
		var rep runJSON
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.IDs) != 150 {
			t.Fatalf("run %s: %d ids, want 150", filepath.Base(path), len(rep.IDs))
		}
		return rep.IDs
	}
	if got, want := ids(short), ids(full); !slices.Equal(got, want) {
		t.Errorf("--ctx 200 on the 64-position artifact: %v\ncompiled for 200: %v", got, want)
	}
	code, _, stderr := runCLI(t, "run", "-m", short, "--ctx", "5000", "-p", "Once", "-n", "1")
	if code == 0 || !strings.Contains(stderr, "5000") || !strings.Contains(stderr, "2048") {
		t.Errorf("--ctx 5000 of a model trained for 2048: exit %d, %q", code, stderr)
	}
	if code, _, _ := runCLI(t, "bench", "-m", short, "-p", "150", "-n", "2", "-r", "1", "--no-warmup", "--json"); code == 0 {
		t.Error("bench ran a 152-position test on a 64-position artifact without --ctx")
	}
	code, stdout, stderr := runCLI(t, "bench", "-m", short, "--ctx", "200", "-p", "150", "-n", "2", "-r", "1", "--no-warmup", "--json", "-t", "1")
	if code != 0 {
		t.Fatalf("bench --ctx 200: exit %d: %s", code, stderr)
	}
	var rep struct {
		Ctx int `json:"ctx"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Ctx != 200 {
		t.Errorf("bench --ctx 200 reports context %d (%v)", rep.Ctx, err)
	}
}
