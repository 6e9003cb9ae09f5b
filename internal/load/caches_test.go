package load

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/hf/hub"
)

// TestCachesRemove: an artifact goes by its name with or without .aot;
// a name in neither cache is a NotCachedError saying whether it names a
// Hub repository.
func TestCachesRemove(t *testing.T) {
	hubDir, artDir := t.TempDir(), t.TempDir()
	t.Setenv("HF_HUB_CACHE", hubDir)
	t.Setenv(compile.CacheEnv, artDir)
	for _, name := range []string{"a.aot", "b.aot", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(artDir, name), []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ListCaches()
	if err != nil || c.HubDir != hubDir || c.ArtifactDir != artDir || len(c.Artifacts) != 2 || len(c.Models) != 0 {
		t.Fatalf("ListCaches = %+v, %v", c, err)
	}
	removed := map[string]int64{}
	note := func(name string, size int64) { removed[name] = size }
	if err := c.Remove("a", note); err != nil || removed["a.aot"] != 5 {
		t.Fatalf("Remove(a): %v, removed %v", err, removed)
	}
	if _, err := os.Stat(filepath.Join(artDir, "a.aot")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a.aot is still there: %v", err)
	}
	var nc *NotCachedError
	if err := c.Remove("nothing", note); !errors.As(err, &nc) || nc.Repo != "" {
		t.Fatalf("Remove(nothing): %v", err)
	}
	if err := c.Remove("org/model", note); !errors.As(err, &nc) || nc.Repo != "org/model" || nc.HubDir != hubDir {
		t.Fatalf("Remove(org/model): %v", err)
	}
	c, err = OpenCaches()
	if err != nil || len(c.Artifacts) != 1 {
		t.Fatalf("OpenCaches = %+v, %v", c, err)
	}
	if err := c.RemoveArtifacts(note); err != nil || removed["b.aot"] != 5 {
		t.Fatalf("RemoveArtifacts: %v, removed %v", err, removed)
	}
}

func TestCachesWrite(t *testing.T) {
	c := &Caches{Models: []hub.CachedRepo{{Repo: "org/model", Size: 2048, Refs: map[string]string{"main": "0123456789abcdef"},
		Files: []string{"config.json", "model.safetensors"}}},
		Artifacts: []compile.CachedArtifact{{Name: "x.aot", Size: 1024, Modified: time.Date(2026, 1, 2, 3, 4, 0, 0, time.Local)}}}
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "MODEL      SIZE     REVISION           FILES\n" +
		"org/model  2.0 KiB  main 0123456789ab  model.safetensors +1\n" +
		"\n" +
		"ARTIFACT  SIZE     COMPILED\n" +
		"x.aot     1.0 KiB  2026-01-02 03:04\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (&Caches{}).Write(&b); err != nil || b.String() != "MODEL  SIZE  REVISION  FILES\n(none)\n\nARTIFACT  SIZE  COMPILED\n(none)\n" {
		t.Fatalf("empty caches: %q, %v", b.String(), err)
	}
	if got := summarizeFiles([]string{"a.gguf", "b.gguf", "c.gguf", "README.md"}); got != "a.gguf … (3 weight files) +1" {
		t.Fatalf("summarizeFiles: %q", got)
	}
}
