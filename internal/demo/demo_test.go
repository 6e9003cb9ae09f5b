//go:build !nodemo

package demo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmbeddedModel: the embedded file is the GGUF whose sha256 the
// package (and the test data's provenance) names, and its license is MIT
// with Karpathy's copyright.
func TestEmbeddedModel(t *testing.T) {
	sum := sha256.Sum256(GGUF())
	if got := hex.EncodeToString(sum[:]); got != SHA256 {
		t.Fatalf("embedded model sha256 %s, want %s", got, SHA256)
	}
	if len(GGUF()) != 1185376 || !bytes.HasPrefix(GGUF(), []byte("GGUF")) {
		t.Fatalf("embedded model: %d bytes, magic %q", len(GGUF()), GGUF()[:4])
	}
	for _, want := range []string{"MIT License", "Copyright (c) 2023 Andrej Karpathy"} {
		if !strings.Contains(License(), want) {
			t.Errorf("license lacks %q", want)
		}
	}
	if !strings.Contains(FileName(), SHA256[:16]) || !strings.HasSuffix(FileName(), ".gguf") {
		t.Errorf("file name %q does not carry the hash and extension", FileName())
	}
}

// TestPathWritesOnce: the first call writes the model and its license, a
// second call keeps the same file, a damaged file is replaced, and no
// temporary file is left behind.
func TestPathWritesOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	p, err := Path(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(p) != dir {
		t.Fatalf("path %s is not in %s", p, dir)
	}
	have, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(have, GGUF()) {
		t.Fatalf("written model differs from the embedded one (%v)", err)
	}
	if lic, err := os.ReadFile(p + ".LICENSE"); err != nil || string(lic) != License() {
		t.Fatalf("license beside the model: %v", err)
	}
	st1, _ := os.Stat(p)
	p2, err := Path(dir)
	st2, _ := os.Stat(p2)
	if err != nil || p2 != p || !os.SameFile(st1, st2) {
		t.Fatalf("second call: %s, %v (same file: %v)", p2, err, os.SameFile(st1, st2))
	}

	// a truncated file (an interrupted copy by other means) is replaced
	if err := os.WriteFile(p, GGUF()[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(dir); err != nil {
		t.Fatal(err)
	}
	if have, _ := os.ReadFile(p); !bytes.Equal(have, GGUF()) {
		t.Fatal("a damaged model file was not replaced")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if len(entries) != 2 {
		t.Errorf("%d files in the folder, want the model and its license", len(entries))
	}
}

// TestPathError: a folder that cannot be made gives an error naming the
// demo model, not a panic or a half-written file.
func TestPathError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Path(filepath.Join(file, "demo"))
	if err == nil || !strings.Contains(err.Error(), "demo model") {
		t.Fatalf("error %v, want one naming the demo model", err)
	}
}
