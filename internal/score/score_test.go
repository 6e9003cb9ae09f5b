package score

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// tinyModel writes a small Llama checkpoint folder of 64 positions with a
// SentencePiece tokenizer and returns it.
func tinyModel(t *testing.T) string {
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
	return dir
}

// TestText scores a text within the model's context and refuses a
// context past it, naming both.
func TestText(t *testing.T) {
	m := Model{Path: tinyModel(t), Threads: 1}
	text := strings.Repeat("Once upon a time there was a little girl who liked to play. ", 12)
	r, err := Text(context.Background(), m, text, TextOptions{Ctx: 32, Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Chunks != 2 || r.Tokens <= 0 || !(r.PPL > 1) {
		t.Errorf("result %+v", r)
	}
	if _, err := Text(context.Background(), m, text, TextOptions{Ctx: 128}); err == nil || !strings.Contains(err.Error(), "128") || !strings.Contains(err.Error(), "64") {
		t.Errorf("a context past the model's: %v", err)
	}
}

// TestParsePhases: known phases in the order given; an unknown or
// repeated one is an error naming it.
func TestParsePhases(t *testing.T) {
	got, err := ParsePhases("float, qdq,artifact")
	if err != nil || strings.Join(got, ",") != "float,qdq,artifact" {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"float,gpu", "qdq,qdq", ""} {
		if _, err := ParsePhases(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
