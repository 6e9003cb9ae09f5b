package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestStoreGPT2Dir stores the GPT-2 layout folders of the test data
// (qwen2.5: vocab.json + merges.txt; llama3.2: encoder.json + vocab.bpe,
// each with tokenizer_config.json) as one Stored, builds it back and
// checks it encodes the fixture texts and decodes its ids as LoadDir's
// tokenizer of the folder does, with its BOS, EOS and added tokens.
func TestStoreGPT2Dir(t *testing.T) {
	texts := fixtureTexts(t)
	for _, rel := range []string{"tokenizers/qwen2.5", "tokenizers/llama3.2"} {
		dir := filepath.Dir(testutil.Path(t, filepath.Join(rel, "tokenizer_config.json")))
		want := bpeLoad(t, rel)
		st, err := StoreGPT2Dir(dir)
		if err != nil || st == nil || st.Kind != KindGPT2Files {
			t.Fatalf("%s: stored %v, %v", rel, st, err)
		}
		tok, err := st.Build(want.VocabSize())
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if tok.VocabSize() != want.VocabSize() || tok.BOS() != want.BOS() || tok.EOS() != want.EOS() {
			t.Errorf("%s: vocabulary %d, BOS %d, EOS %d; LoadDir's %d, %d, %d", rel,
				tok.VocabSize(), tok.BOS(), tok.EOS(), want.VocabSize(), want.BOS(), want.EOS())
		}
		for _, s := range append(texts, "<|im_start|>user\nhi<|im_end|>") {
			opts := EncodeOptions{AddSpecial: true, ParseSpecial: true}
			got, ids := tok.Encode(s, opts), want.Encode(s, opts)
			if !slices.Equal(got, ids) {
				t.Fatalf("%s: %q encodes to %v, LoadDir's tokenizer to %v", rel, s, got, ids)
			}
			if tok.Decode(ids) != want.Decode(ids) {
				t.Fatalf("%s: %v decodes to %q, LoadDir's tokenizer to %q", rel, ids, tok.Decode(ids), want.Decode(ids))
			}
		}
	}
	if st, err := StoreGPT2Dir(t.TempDir()); st != nil || err != nil {
		t.Errorf("an empty folder: %v, %v; want nil, nil", st, err)
	}
}

// TestGPT2StoredRefused checks that stored data without its vocabulary or
// merges, or not JSON, is refused naming the problem, and that a folder
// whose vocabulary is not readable fails to store.
func TestGPT2StoredRefused(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`not json`, "invalid JSON"},
		{`{"vocab":"vocab.json","merges":"merges.txt","files":{"vocab.json":"e30="}}`, `no file "merges.txt"`},
		{`{"vocab":"","merges":"merges.txt","files":{"merges.txt":""}}`, `no file ""`},
	} {
		_, err := (&Stored{Kind: KindGPT2Files, Data: []byte(c.data)}).Build(10)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s", c.data, err, c.want)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "vocab.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "merges.txt"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "encoder.json"), []byte(`{"a":0}`), 0o644)
	os.WriteFile(filepath.Join(dir, "vocab.bpe"), []byte("#version: 0.2\n"), 0o644)
	st, err := StoreGPT2Dir(dir)
	if err != nil || st == nil {
		t.Fatalf("a folder with encoder.json + vocab.bpe beside a vocab.json folder: %v, %v", st, err)
	}
	var s gpt2Stored
	if err := json.Unmarshal(st.Data, &s); err != nil || s.Vocab != "encoder.json" {
		t.Errorf("stored layout %q, %v; want encoder.json", s.Vocab, err)
	}
	if _, err := st.Build(1); err != nil {
		t.Error(err)
	}
}
