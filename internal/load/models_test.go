package load

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestModelsIn(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.gguf", "a.aot", "notes.txt", ".hidden.gguf"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "ck"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ck", "model.safetensors"), []byte("123"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ModelsIn(dir)
	want := []string{filepath.Join(dir, "a.aot"), filepath.Join(dir, "b.gguf"), filepath.Join(dir, "ck")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ModelsIn: %v, %v; want %v", got, err, want)
	}
	if n := PathBytes(filepath.Join(dir, "ck")); n != 3 {
		t.Errorf("PathBytes of the folder: %d, want 3", n)
	}
	if _, err := ModelsIn(filepath.Join(dir, "ck")); err == nil {
		t.Error("a folder with no model accepted")
	}
}
