package qmodel

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOwnedFiles: the manifest's "files" are what a folder owns (the
// manifest always among them, names that leave the folder dropped); an
// older manifest owns the names quantize writes; an empty folder owns
// nothing; a folder with files but no readable manifest is refused.
func TestOwnedFiles(t *testing.T) {
	write := func(dir, manifest string) {
		if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	write(dir, `{"files": ["model.safetensors", "../escape", "/abs", "/", "a/b", "..", "tokenizer.json"]}`)
	got, err := OwnedFiles(dir)
	if want := []string{"model.safetensors", "tokenizer.json", ManifestName}; err != nil || !slices.Equal(got, want) {
		t.Errorf("files: %v %v, want %v", got, err, want)
	}
	write(dir, `{"format_version": 1, "tokenizer": "tok.custom"}`)
	got, _ = OwnedFiles(dir)
	for _, n := range []string{ManifestName, WeightsName, "tokenizer.json", TokenizerGGUF, "tok.custom"} {
		if !slices.Contains(got, n) {
			t.Errorf("old manifest: %s not owned: %v", n, got)
		}
	}
	if got, err := OwnedFiles(t.TempDir()); err != nil || got != nil {
		t.Errorf("empty folder: %v %v", got, err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644)
	if _, err := OwnedFiles(other); err == nil || !strings.Contains(err.Error(), "not a quantized folder aotlm wrote") {
		t.Errorf("no manifest: %v", err)
	}
	write(other, "{not json")
	if _, err := OwnedFiles(other); err == nil {
		t.Error("a broken manifest owns files")
	}
}

// FuzzOwnedFiles: whatever a manifest holds, the names it owns are plain
// names inside the folder, and the manifest is one of them.
func FuzzOwnedFiles(f *testing.F) {
	for _, s := range []string{`{"files": ["a", "../b"]}`, `{}`, `{"tokenizer": "../../x"}`, `[]`, `{"files": null}`, `{"files": [""]}`, `{"files": ["/"]}`, `{"files": ["a\\\\b"]}`} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, manifest []byte) {
		if err := os.WriteFile(filepath.Join(dir, ManifestName), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		owned, err := OwnedFiles(dir)
		if err != nil {
			return
		}
		if !slices.Contains(owned, ManifestName) {
			t.Fatalf("%q: the manifest is not owned: %v", manifest, owned)
		}
		for _, n := range owned {
			if n == "" || n == "." || n == ".." || strings.ContainsRune(n, filepath.Separator) {
				t.Fatalf("%q owns %q", manifest, n)
			}
		}
	})
}
