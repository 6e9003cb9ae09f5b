package tokenizer

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// spmReference is testdata reference/sentencepiece-encodings.json: encodings
// made by the sentencepiece library (Python, encode(text) without BOS/EOS)
// and its decode of those ids.
type spmReference struct {
	Models map[string]struct {
		File      string `json:"file"`
		VocabSize int    `json:"vocab_size"`
		BOS       int    `json:"bos_id"`
		EOS       int    `json:"eos_id"`
		Unk       int    `json:"unk_id"`
	} `json:"models"`
	Cases map[string][]struct {
		Text    string `json:"text"`
		IDs     []int  `json:"ids"`
		Decoded string `json:"decoded"`
	} `json:"cases"`
}

func loadSpmReference(t testing.TB) *spmReference {
	t.Helper()
	var ref spmReference
	if err := json.Unmarshal(testutil.ReadFile(t, "reference/sentencepiece-encodings.json"), &ref); err != nil {
		t.Fatalf("reference: %v", err)
	}
	return &ref
}

func loadSpm(t testing.TB, rel string) *SentencePiece {
	t.Helper()
	sp, err := LoadSentencePiece(testutil.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestSentencePieceReference(t *testing.T) {
	ref := loadSpmReference(t)
	if len(ref.Models) != 2 {
		t.Fatalf("reference lists %d models, want 2", len(ref.Models))
	}
	for name, m := range ref.Models {
		t.Run(name, func(t *testing.T) {
			sp := loadSpm(t, m.File)
			if sp.VocabSize() != m.VocabSize || sp.BOS() != m.BOS || sp.EOS() != m.EOS || sp.Unknown() != m.Unk {
				t.Fatalf("vocab %d bos %d eos %d unk %d, want %d %d %d %d",
					sp.VocabSize(), sp.BOS(), sp.EOS(), sp.Unknown(), m.VocabSize, m.BOS, m.EOS, m.Unk)
			}
			cases := ref.Cases[name]
			if len(cases) == 0 {
				t.Fatal("no cases")
			}
			bad := 0
			for _, c := range cases {
				got := sp.Encode(c.Text, EncodeOptions{})
				if !slices.Equal(got, c.IDs) {
					bad++
					if bad <= 5 {
						t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
					}
				}
				if dec := sp.Decode(c.IDs); dec != c.Decoded {
					bad++
					if bad <= 5 {
						t.Errorf("Decode(%v) = %q, want %q", c.IDs, dec, c.Decoded)
					}
				}
			}
			t.Logf("%d cases, %d mismatches", len(cases), bad)
			if got := sp.Encode("Hello", EncodeOptions{AddSpecial: true}); len(got) == 0 || got[0] != m.BOS {
				t.Errorf("AddSpecial: %v does not start with BOS %d", got, m.BOS)
			}
		})
	}
}

// readLlamaCppFixture parses a llama.cpp test-tokenizer-0 pair: inputs in
// .inp separated by "\n__ggml_vocab_test__\n" (the file ends with one), and
// one line of space-separated ids per input in .out.
func readLlamaCppFixture(t *testing.T, base string) ([]string, [][]int) {
	t.Helper()
	inp := string(testutil.ReadFile(t, base+".inp"))
	out := string(testutil.ReadFile(t, base+".out"))
	texts := strings.Split(inp, "\n__ggml_vocab_test__\n")
	if texts[len(texts)-1] != "" {
		t.Fatalf("%s.inp does not end with a separator", base)
	}
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d inputs but %d output lines", base, len(texts), len(lines))
	}
	ids := make([][]int, len(lines))
	for i, l := range lines {
		ids[i] = []int{}
		for _, f := range strings.Fields(l) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", base, i+1, err)
			}
			ids[i] = append(ids[i], v)
		}
	}
	return texts, ids
}

// TestLlamaCppSPMFixtures checks llama.cpp's expected SPM tokenizations
// (with the space prefix, without BOS) through the Llama 2 tokenizer.model,
// and through the same vocabulary built as a GGUF "llama" vocabulary.
func TestLlamaCppSPMFixtures(t *testing.T) {
	sp := loadSpm(t, "llama2c/tokenizer.model")
	gg, err := FromGGUF(ggufMetaFromSpm(sp))
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"tokenizer-fixtures/ggml-vocab-llama-spm.gguf", "tokenizer-fixtures/ggml-vocab-phi-3.gguf"} {
		texts, want := readLlamaCppFixture(t, base)
		if len(texts) != 46 {
			t.Fatalf("%s: %d cases, want 46", base, len(texts))
		}
		for name, tok := range map[string]Tokenizer{"model": sp, "gguf": gg} {
			ok := 0
			for i, text := range texts {
				got := tok.Encode(text, EncodeOptions{})
				if slices.Equal(got, want[i]) {
					ok++
				} else {
					t.Errorf("%s %s: Encode(%q)\n got %v\nwant %v", base, name, text, got, want[i])
				}
			}
			t.Logf("%s via %s: %d/%d match", base, name, ok, len(texts))
		}
	}
}

// ggufMetaFromSpm builds GGUF tokenizer metadata holding sp's vocabulary,
// as llama.cpp's converter writes it.
func ggufMetaFromSpm(sp *SentencePiece) map[string]any {
	n := sp.VocabSize()
	tokens, scores, types := make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		tokens[i] = sp.Token(i)
		scores[i] = float64(sp.Score(i))
		types[i] = int64(sp.Type(i))
	}
	return map[string]any{
		"tokenizer.ggml.model":            "llama",
		"tokenizer.ggml.tokens":           tokens,
		"tokenizer.ggml.scores":           scores,
		"tokenizer.ggml.token_type":       types,
		"tokenizer.ggml.bos_token_id":     uint64(sp.BOS()),
		"tokenizer.ggml.eos_token_id":     uint64(sp.EOS()),
		"tokenizer.ggml.unknown_token_id": uint64(sp.Unknown()),
	}
}

// warAndPeaceLines returns the first n lines of text/war-and-peace.txt.
func warAndPeaceLines(t testing.TB, n int) []string {
	t.Helper()
	lines := strings.Split(string(testutil.ReadFile(t, "text/war-and-peace.txt")), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return lines
}

// collapseSpaces is sentencepiece's remove_extra_whitespaces on text with
// no normalization map: leading and trailing spaces dropped, runs of spaces
// made one. Only U+0020 counts.
func collapseSpaces(s string) string {
	return strings.Trim(regexp.MustCompile(` {2,}`).ReplaceAllString(s, " "), " ")
}

func TestSentencePieceRoundTripWarAndPeace(t *testing.T) {
	lines := warAndPeaceLines(t, 2000)
	if len(lines) != 2000 {
		t.Fatalf("%d lines", len(lines))
	}
	// The 32000 vocabulary is identity-normalized without whitespace
	// cleanup, so text comes back exactly; tok512 collapses spaces.
	for _, tc := range []struct {
		file string
		norm func(string) string
	}{
		{"llama2c/tokenizer.model", func(s string) string { return s }},
		{"llama2c/tok512-dratman/tok512.model", collapseSpaces},
	} {
		sp := loadSpm(t, tc.file)
		bad, tokens := 0, 0
		for _, l := range lines {
			ids := sp.Encode(l, EncodeOptions{})
			tokens += len(ids)
			for _, id := range ids {
				if id < 0 || id >= sp.VocabSize() {
					t.Fatalf("%s: id %d out of range", tc.file, id)
				}
			}
			if got, want := sp.Decode(ids), tc.norm(l); got != want {
				bad++
				if bad <= 3 {
					t.Errorf("%s: round trip of %q gave %q", tc.file, want, got)
				}
			}
		}
		t.Logf("%s: %d lines, %d tokens, %d mismatches", tc.file, len(lines), tokens, bad)
	}
}

func BenchmarkSentencePieceEncode(b *testing.B) {
	sp := loadSpm(b, "llama2c/tokenizer.model")
	lines := strings.Split(string(testutil.ReadFile(b, "text/war-and-peace.txt")), "\n")
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			sp.Encode(l, EncodeOptions{})
		}
	}
}
