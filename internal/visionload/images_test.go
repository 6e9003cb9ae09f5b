package visionload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// TestMark: a prompt without markers gets one per image before it; one
// with as many markers as images is kept; another count is refused.
func TestMark(t *testing.T) {
	r := &PromptImages{encoded: make([]*vlm.Image, 2)}
	for prompt, want := range map[string]string{
		"Describe.":                  "<image><image>Describe.",
		"<image> and <image>: same?": "<image> and <image>: same?",
	} {
		if got, err := r.Mark(prompt); err != nil || got != want {
			t.Errorf("Mark(%q) = %q, %v; want %q", prompt, got, err, want)
		}
	}
	if _, err := r.Mark("<image> alone"); err == nil || !strings.Contains(err.Error(), "1 <image> markers for 2 images") {
		t.Errorf("one marker for two images: %v", err)
	}
}

// TestReadImageLimit: a file over the decoding limit is refused before
// it is read.
func TestReadImageLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.png")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, vision.DefaultLimits.MaxBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadImage(path); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Fatalf("ReadImage over the limit: %v", err)
	}
	if _, err := ReadImage(filepath.Join(t.TempDir(), "missing.png")); err == nil {
		t.Fatal("a missing file gave no error")
	}
}
