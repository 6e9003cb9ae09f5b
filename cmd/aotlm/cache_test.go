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

// cachedArtifacts lists the artifacts in the cache folder.
func cachedArtifacts(t *testing.T, cache string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(cache, "*.aot"))
	return m
}

// TestCacheRebuildsDamagedArtifact: a cached artifact that no longer opens
// (truncated) is compiled again instead of failing every later run.
func TestCacheRebuildsDamagedArtifact(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(compile.CacheEnv, cache)
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	args := []string{"run", "-m", src, "-p", "Lily wanted to", "-n", "8", "--temp", "0"}
	code, first, errs := runCLI(t, args...)
	arts := cachedArtifacts(t, cache)
	if code != 0 || len(arts) != 1 {
		t.Fatalf("first run: exit %d (%s), artifacts %v", code, errs, arts)
	}
	if err := os.Truncate(arts[0], 1000); err != nil {
		t.Fatal(err)
	}
	code, again, errs := runCLI(t, args...)
	if code != 0 || again != first {
		t.Fatalf("after truncating the cached artifact: exit %d (%s), %q want %q", code, errs, again, first)
	}
	if st, err := os.Stat(arts[0]); err != nil || st.Size() <= 1000 {
		t.Fatalf("the damaged artifact was not rebuilt: %v", err)
	}
}

// TestCacheKeySeesReplacedModel: a model replaced in place by another of
// the same size with its modification time set back is compiled anew
// (the key holds the file's inode and change time).
func TestCacheKeySeesReplacedModel(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(compile.CacheEnv, cache)
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	src := testutil.ReadFile(t, "models/stories260K/stories260K.gguf")
	if err := os.WriteFile(model, src, 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(model)
	args := []string{"run", "-m", model, "-p", "Lily wanted to", "-n", "8", "--temp", "0"}
	if code, _, errs := runCLI(t, args...); code != 0 {
		t.Fatal(errs)
	}
	// same bytes but one weight, same size, same modification time
	changed := append([]byte(nil), src...)
	changed[len(changed)-100] ^= 0x40
	if err := os.WriteFile(model, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(model, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, args...); code != 0 {
		t.Fatal(errs)
	}
	if arts := cachedArtifacts(t, cache); len(arts) != 2 {
		t.Fatalf("a replaced model reused the stale artifact: %v", arts)
	}
}

// TestRunShrinksArtifactContext: -c below an artifact's context makes a
// smaller session, and a prompt longer than it is refused naming it.
func TestRunShrinksArtifactContext(t *testing.T) {
	art := filepath.Join(t.TempDir(), "s.aot")
	if code, _, errs := runCLI(t, "compile", testutil.Path(t, "models/stories260K/stories260K.gguf"), "-o", art, "--ctx", "256"); code != 0 {
		t.Fatal(errs)
	}
	prompt := strings.Repeat("Once upon a time ", 8)
	code, _, errs := runCLI(t, "run", "-m", art, "-c", "16", "-p", prompt, "-n", "4")
	if code != 1 || !strings.Contains(errs, "context 16") {
		t.Fatalf("a 33-token prompt in -c 16: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, "run", "-m", art, "-c", "64", "-p", prompt, "-n", "4", "--temp", "0"); code != 0 {
		t.Fatalf("-c 64: %s", errs)
	}
}
