package compile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCacheKeySeesModuleFolders: the cache key of a model folder changes
// when a file of one of its sentence-transformers module folders
// (2_Dense) changes, and not for another subfolder.
func TestCacheKeySeesModuleFolders(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string, at time.Time) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	write("config.json", "{}", t0)
	write("2_Dense/model.safetensors", "a", t0)
	write("onnx/model.onnx", "a", t0)
	key := func() string {
		k, err := cacheKey(dir, Options{Ctx: 32})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key()
	write("onnx/model.onnx", "bb", t0.Add(time.Hour))
	if key() != k0 {
		t.Error("a file outside the module folders changed the key")
	}
	write("2_Dense/model.safetensors", "bb", t0.Add(time.Hour))
	if key() == k0 {
		t.Error("a changed Dense module kept the key")
	}
	for name, want := range map[string]bool{"1_Pooling": true, "2_Dense": true, "onnx": false, "_x": false, "3_": false, "a_b": false} {
		if moduleFolder(name) != want {
			t.Errorf("moduleFolder(%q) = %v", name, !want)
		}
	}
}
