package compile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// tinyWithTokenizer writes the random tiny Llama (vocabulary 64) with a
// tokenizer.json of single-letter tokens whose post-processor adds the
// special token of id special before every sequence.
func tinyWithTokenizer(t *testing.T, special int) string {
	t.Helper()
	dir := t.TempDir()
	if err := tinymodel.WriteLlama(dir, tinymodel.Default(), 5); err != nil {
		t.Fatal(err)
	}
	vocab := map[string]int{}
	for i := range 26 {
		vocab[string(rune('a'+i))] = i
		vocab[string(rune('A'+i))] = 26 + i
	}
	tok := map[string]any{
		"model":        map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
		"added_tokens": []any{map[string]any{"id": 60, "content": "<s>", "special": true}},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{special}}}},
	}
	b, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestProbeRefusesAnUnrunnableTokenizer: a tokenizer whose special tokens
// encode outside the model's vocabulary makes an artifact no prompt can
// run; compile refuses it before the rename and leaves nothing behind,
// and the same tokenizer with an id inside the vocabulary compiles.
func TestProbeRefusesAnUnrunnableTokenizer(t *testing.T) {
	for _, id := range []int{64, 1000000} {
		out := filepath.Join(t.TempDir(), "m.aot")
		err := CompileFile(tinyWithTokenizer(t, id), out, Options{Ctx: 32})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint(id)) || !strings.Contains(err.Error(), "vocabulary") {
			t.Errorf("special id %d: %v", id, err)
		}
		if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
			t.Errorf("special id %d: left %d files", id, len(ents))
		}
	}
	out := filepath.Join(t.TempDir(), "m.aot")
	if err := CompileFile(tinyWithTokenizer(t, 60), out, Options{Ctx: 32}); err != nil {
		t.Errorf("special id 60: %v", err)
	}
}
