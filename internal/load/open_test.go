package load

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// tinyCheckpoint writes a small Llama checkpoint folder with a
// SentencePiece tokenizer and points the compile cache at a folder of its
// own; it returns the checkpoint.
func tinyCheckpoint(t *testing.T) string {
	t.Helper()
	tok := testutil.ReadFile(t, "llama2c/tok512-dratman/tok512.model")
	dir := filepath.Join(t.TempDir(), "tiny")
	cfg := tinymodel.Config{HiddenSize: 32, IntermediateSize: 48, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, VocabSize: 512, MaxPositions: 64}
	if err := tinymodel.WriteLlama(dir, cfg, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.model"), tok, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(compile.CacheEnv, t.TempDir())
	t.Setenv(kernel.TuneEnv, "off")
	return dir
}

// countOpens makes openArtifact count its calls by path until the test
// ends.
func countOpens(t *testing.T) map[string]int {
	t.Helper()
	opens := map[string]int{}
	saved := openArtifact
	openArtifact = func(path string, o aotlm.Options) (*aotlm.Model, error) {
		opens[path]++
		return saved(path, o)
	}
	t.Cleanup(func() { openArtifact = saved })
	return opens
}

// TestCachedRunOpensArtifactOnce: a checkpoint compiled into the cache
// is opened once by the run that compiles it and once by a later run
// that finds it there, with nothing else opening the artifact first.
func TestCachedRunOpensArtifactOnce(t *testing.T) {
	ck := tinyCheckpoint(t)
	opts := Options{Threads: 1, Compile: CompileDefaults()}
	for _, run := range []string{"compiling", "cached"} {
		opens := countOpens(t)
		m, err := Open(ck, opts)
		if err != nil {
			t.Fatalf("%s run: %v", run, err)
		}
		m.Close()
		if len(opens) != 1 {
			t.Fatalf("%s run opened %d artifacts (%v), want 1", run, len(opens), opens)
		}
		for path, n := range opens {
			if n != 1 {
				t.Errorf("%s run opened %s %d times, want 1", run, path, n)
			}
			if filepath.Dir(path) != os.Getenv(compile.CacheEnv) {
				t.Errorf("%s run opened %s, not in the cache", run, path)
			}
		}
	}
}

// TestCachedRunRecompilesDamagedArtifact: a cached artifact cut short
// is compiled again, said on the log, and the run opens the new one.
func TestCachedRunRecompilesDamagedArtifact(t *testing.T) {
	ck := tinyCheckpoint(t)
	opts := Options{Threads: 1, Compile: CompileDefaults()}
	out, err := compile.CachePath(ck, opts.Compile)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(ck, opts)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := os.Truncate(out, 100); err != nil {
		t.Fatal(err)
	}
	var log logBuffer
	opts.Log = &log
	opens := countOpens(t)
	m, err = Open(ck, opts)
	if err != nil {
		t.Fatalf("damaged cache: %v", err)
	}
	m.Close()
	if opens[out] != 2 {
		t.Errorf("artifact opened %d times, want 2 (the damaged one, then the new one)", opens[out])
	}
	if want := "does not open"; !log.contains(want) || !log.contains("compiling") {
		t.Errorf("log %q does not say the artifact was compiled again", log.String())
	}
}

// TestOpenRefusesModeWithoutRecompiling: an error that is not the
// artifact's (a bad mode) comes back as it is, the cache kept.
func TestOpenRefusesModeWithoutRecompiling(t *testing.T) {
	ck := tinyCheckpoint(t)
	opts := Options{Threads: 1, Compile: CompileDefaults()}
	m, err := Open(ck, opts)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	var log logBuffer
	opts.Log, opts.Mode = &log, "sideways"
	if _, err := Open(ck, opts); err == nil {
		t.Fatal("mode sideways was accepted")
	}
	if log.String() != "" {
		t.Errorf("a bad mode compiled again: %q", log.String())
	}
}

// openOnlyEnv makes the test binary open the artifact it names and exit
// (TestOpenWritesNoFile's child: a process whose kernels no tune has
// touched yet).
const openOnlyEnv = "AOTLM_LOAD_TEST_OPEN_ONLY"

func TestMain(m *testing.M) {
	if path := os.Getenv(openOnlyEnv); path != "" {
		mod, err := aotlm.Open(path, aotlm.Options{Threads: 1})
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		mod.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOpenWritesNoFile: opening an artifact in a fresh process, with no
// tune stored, writes nothing into the cache or home folders (no probe
// result stored), and takes the default walk.
func TestOpenWritesNoFile(t *testing.T) {
	ck := tinyCheckpoint(t)
	art, err := Cached(ck, CompileDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	home, cache, xdg := t.TempDir(), t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), openOnlyEnv+"="+art, "HOME="+home, compile.CacheEnv+"="+cache,
		"XDG_CACHE_HOME="+xdg, kernel.TuneEnv+"=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("open: %v\n%s", err, out)
	}
	for _, dir := range []string{home, cache, xdg} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("Open wrote %s", filepath.Join(dir, e.Name()))
		}
	}
}

// TestDefaultKVSharesTheCache: options that leave the KV cache storage
// unsaid compile nothing new after the defaults, which say it.
func TestDefaultKVSharesTheCache(t *testing.T) {
	ck := tinyCheckpoint(t)
	var log logBuffer
	opts := Options{Threads: 1, Compile: CompileDefaults(), Log: &log}
	for _, kv := range []string{KV, ""} {
		opts.Compile.KV = kv
		m, err := Open(ck, opts)
		if err != nil {
			t.Fatalf("kv %q: %v", kv, err)
		}
		m.Close()
	}
	if n := strings.Count(log.String(), "compiling"); n != 1 {
		t.Errorf("compiled %d times, want 1: %q", n, log.String())
	}
}
