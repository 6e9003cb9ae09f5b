package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// The byte-level vocabularies in the shared test data are used through the
// layouts they ship in (no full tokenizer.json of these models fits there):
// tokenizers/qwen2.5 is vocab.json + merges.txt + tokenizer_config.json,
// tokenizers/llama3.2 is encoder.json + vocab.bpe + tokenizer_config.json
// (plus Meta's tiktoken tokenizer.model).

var (
	bpeLoadedMu sync.Mutex
	bpeLoaded   = map[string]*BPE{}
)

// bpeLoad loads (once per test binary) the tokenizer in a test data folder.
func bpeLoad(t testing.TB, rel string) *BPE {
	t.Helper()
	bpeLoadedMu.Lock()
	defer bpeLoadedMu.Unlock()
	if b, ok := bpeLoaded[rel]; ok {
		return b
	}
	dir := filepath.Dir(testutil.Path(t, filepath.Join(rel, "tokenizer_config.json")))
	tok, err := LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir(%s): %v", rel, err)
	}
	b, ok := tok.(*BPE)
	if !ok {
		t.Fatalf("LoadDir(%s) gave %T, want *BPE", rel, tok)
	}
	bpeLoaded[rel] = b
	return b
}

type bpeCase struct {
	text string
	ids  []int
}

// readVocabTest reads a llama.cpp test-tokenizer-0 pair: inputs separated
// by "\n__ggml_vocab_test__\n" in .inp, one line of space-separated ids per
// input in .out.
func readVocabTest(t *testing.T, name string) []bpeCase {
	inp := string(testutil.ReadFile(t, "tokenizer-fixtures/"+name+".inp"))
	out := string(testutil.ReadFile(t, "tokenizer-fixtures/"+name+".out"))
	texts := strings.Split(inp, "\n__ggml_vocab_test__\n")
	if texts[len(texts)-1] == "" {
		texts = texts[:len(texts)-1]
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d inputs but %d output lines", name, len(texts), len(lines))
	}
	cases := make([]bpeCase, len(texts))
	for i, text := range texts {
		cases[i].text = text
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s line %d: %v", name, i+1, err)
			}
			cases[i].ids = append(cases[i].ids, id)
		}
	}
	return cases
}

// checkCases encodes as llama.cpp's test-tokenizer-0 does (no BOS, special
// tokens not parsed) and compares.
func checkCases(t *testing.T, tok Tokenizer, cases []bpeCase) {
	t.Helper()
	bad := 0
	for i, c := range cases {
		got := tok.Encode(c.text, EncodeOptions{})
		if !slices.Equal(got, c.ids) {
			bad++
			if bad <= 5 {
				t.Errorf("case %d %q:\n got %v\nwant %v", i, c.text, got, c.ids)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ", bad, len(cases))
	}
}

// llama.cpp fixture pairs with no vocabulary in the test data; they are
// not covered here.
var bpeFixturesNotCovered = []string{
	"ggml-vocab-bert-bge", "ggml-vocab-command-r", "ggml-vocab-deepseek-coder",
	"ggml-vocab-deepseek-llm", "ggml-vocab-falcon", "ggml-vocab-gpt-2",
	"ggml-vocab-mpt", "ggml-vocab-refact", "ggml-vocab-starcoder",
}

func TestLlamaCppFixturesDir(t *testing.T) {
	t.Logf("not covered (no vocabulary in the test data): %v", bpeFixturesNotCovered)
	for _, tc := range []struct{ fixture, dir string }{
		{"ggml-vocab-qwen2.gguf", "tokenizers/qwen2.5"},
		{"ggml-vocab-llama-bpe.gguf", "tokenizers/llama3.2"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			cases := readVocabTest(t, tc.fixture)
			if len(cases) != 46 {
				t.Fatalf("%d cases, want 46", len(cases))
			}
			checkCases(t, bpeLoad(t, tc.dir), cases)
		})
	}
}

// bpeEncodings reads reference/bpe-encodings.json (llama.cpp encodings).
func bpeEncodings(t *testing.T) map[string][]bpeCase {
	var f struct {
		Cases map[string][]struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "reference/bpe-encodings.json"), &f); err != nil {
		t.Fatal(err)
	}
	out := map[string][]bpeCase{}
	for k, cs := range f.Cases {
		for _, c := range cs {
			out[k] = append(out[k], bpeCase{c.Text, c.IDs})
		}
	}
	return out
}

func TestBPEEncodingsReference(t *testing.T) {
	ref := bpeEncodings(t)
	for _, tc := range []struct{ vocab, dir string }{
		{"qwen2", "tokenizers/qwen2.5"},
		{"llama-bpe", "tokenizers/llama3.2"},
	} {
		t.Run(tc.vocab, func(t *testing.T) {
			cases := ref[tc.vocab]
			if len(cases) < 10 {
				t.Fatalf("only %d reference cases", len(cases))
			}
			checkCases(t, bpeLoad(t, tc.dir), cases)
		})
	}
}

func TestLlama32InputsJSON(t *testing.T) {
	var raw []struct {
		Base64 string `json:"base64"`
		IDs    []int  `json:"ids"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "tokenizers/llama3.2/inputs.json"), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 46 {
		t.Fatalf("%d cases, want 46", len(raw))
	}
	cases := make([]bpeCase, len(raw))
	for i, r := range raw {
		text, err := base64.StdEncoding.DecodeString(r.Base64)
		if err != nil {
			t.Fatal(err)
		}
		cases[i] = bpeCase{string(text), r.IDs}
	}
	checkCases(t, bpeLoad(t, "tokenizers/llama3.2"), cases)
}
