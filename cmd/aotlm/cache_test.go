package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestRunCompilesIntoCache: `run` on an uncompiled model compiles it once
// into the cache; the same model and options reuse that artifact, other
// options make another; --no-compile uses the interpreter and gives the same
// greedy text.
func TestRunCompilesIntoCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(compile.CacheEnv, cache)
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	count := func() int {
		e, _ := os.ReadDir(cache)
		n := 0
		for _, f := range e {
			if strings.HasSuffix(f.Name(), ".aot") {
				n++
			}
		}
		return n
	}
	args := []string{"run", "-m", src, "-p", "Lily wanted to", "-n", "16", "--temp", "0"}
	code, first, errs := runCLI(t, args...)
	if code != 0 || count() != 1 {
		t.Fatalf("first run: exit %d (%s), %d artifacts", code, errs, count())
	}
	entries, _ := os.ReadDir(cache)
	art := filepath.Join(cache, entries[0].Name())
	st1, _ := os.Stat(art)
	code, second, _ := runCLI(t, args...)
	st2, _ := os.Stat(art)
	if code != 0 || count() != 1 || !st1.ModTime().Equal(st2.ModTime()) || second != first {
		t.Fatalf("second run recompiled or differed: %d artifacts, %q vs %q", count(), second, first)
	}
	if code, _, _ := runCLI(t, append(args, "--ar-len", "8")...); code != 0 || count() != 2 {
		t.Fatalf("new options: %d artifacts", count())
	}
	code, interp, _ := runCLI(t, append(args, "--no-compile")...)
	if code != 0 || interp != first {
		t.Fatalf("interpreter gave %q, artifact %q", interp, first)
	}
}
