package model

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil/embedgemma"
)

// TestOpenRefusesEncoder: the interpreter backend, which runs prompts in
// chunks of causal passes, refuses a text encoder (EmbeddingGemma) and
// names what to do instead.
func TestOpenRefusesEncoder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "eg.gguf")
	embedgemma.WriteGGUF(t, p)
	_, err := Open(p, Options{})
	if err == nil || !strings.Contains(err.Error(), "text encoder") || !strings.Contains(err.Error(), "compile") {
		t.Fatalf("got %v, want a text encoder refused", err)
	}
}
