package tokenizer

import (
	"bufio"
	"bytes"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aotlm/aotlm/internal/testutil"
)

func TestSpecialTokensParse(t *testing.T) {
	b := bpeLoad(t, "tokenizers/qwen2.5")
	user := b.Encode("user", EncodeOptions{})
	got := b.Encode("<|im_start|>user", EncodeOptions{ParseSpecial: true})
	want := append([]int{151644}, user...)
	if !slices.Equal(got, want) {
		t.Errorf("ParseSpecial: got %v, want %v", got, want)
	}
	lit := b.Encode("<|im_start|>user", EncodeOptions{})
	if slices.Contains(lit, 151644) || len(lit) < 3 {
		t.Errorf("without ParseSpecial the marker must be plain text, got %v", lit)
	}
	if s := b.Decode(lit); s != "<|im_start|>user" {
		t.Errorf("literal round trip: %q", s)
	}
	// Decode drops special tokens.
	if s := b.Decode(got); s != "user" {
		t.Errorf("Decode(%v) = %q, want %q", got, s, "user")
	}
	if b.EOS() != 151645 || b.BOS() != -1 {
		t.Errorf("qwen2.5 BOS/EOS = %d/%d, want -1/151645 (bos_token null, eos <|im_end|>)", b.BOS(), b.EOS())
	}
	sp := b.SpecialTokens()
	if len(sp) == 0 || sp[0].ID != 151643 || sp[0].Content != "<|endoftext|>" {
		t.Errorf("SpecialTokens()[0] = %+v", sp[0])
	}
}

func TestLlama3BOS(t *testing.T) {
	b := bpeLoad(t, "tokenizers/llama3.2")
	if b.BOS() != 128000 || b.EOS() != 128009 {
		t.Errorf("BOS/EOS = %d/%d, want 128000/128009", b.BOS(), b.EOS())
	}
	got := b.Encode("Hi", EncodeOptions{AddSpecial: true})
	if len(got) < 2 || got[0] != 128000 {
		t.Errorf("AddSpecial: %v", got)
	}
	if b.VocabSize() != 128256 {
		t.Errorf("VocabSize = %d, want 128256", b.VocabSize())
	}
}

// TestTiktokenMatchesEncoderJSON: Meta's tiktoken file must tokenize like
// the same vocabulary in encoder.json + vocab.bpe form.
func TestTiktokenMatchesEncoderJSON(t *testing.T) {
	ref := bpeEncodings(t)["llama-bpe"]
	tk, err := Load(testutil.Path(t, "tokenizers/llama3.2/tokenizer.model"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tk.(*BPE); !ok {
		t.Fatalf("Load(tokenizer.model) gave %T", tk)
	}
	checkCases(t, tk, ref)
	checkCases(t, tk, readVocabTest(t, "ggml-vocab-llama-bpe.gguf"))
	enc := bpeLoad(t, "tokenizers/llama3.2")
	text := string(testutil.ReadFile(t, "text/war-and-peace.txt")[:200000])
	if a, b := tk.Encode(text, EncodeOptions{}), enc.Encode(text, EncodeOptions{}); !slices.Equal(a, b) {
		t.Errorf("tiktoken and encoder.json differ on War and Peace (%d vs %d ids)", len(a), len(b))
	}
	if tk.BOS() != 128000 {
		t.Errorf("tiktoken BOS = %d", tk.BOS())
	}
}

func TestPhi4MiniRoundTrip(t *testing.T) {
	b := bpeLoad(t, "tokenizers/phi4-mini")
	if b.VocabSize() != 200029 {
		t.Errorf("VocabSize = %d, want 200029 (ids up to <|tag|>=200028)", b.VocabSize())
	}
	if id := b.ID("<|user|>"); id != 200021 {
		t.Errorf("<|user|> = %d, want 200021", id)
	}
	if b.EOS() != 199999 {
		t.Errorf("EOS = %d, want 199999", b.EOS())
	}
	if got := b.Encode("<|user|>Hi", EncodeOptions{ParseSpecial: true}); len(got) == 0 || got[0] != 200021 {
		t.Errorf("<|user|> not matched: %v", got)
	}
	roundTrip(t, b, string(testutil.ReadFile(t, "text/war-and-peace.txt")[:300000]))
	roundTrip(t, b, "Don't SHOUT: it's 12345 DIGITS\n\n\tcafé ÀÉ 東京 🙂")
}

func roundTrip(t *testing.T, tok Tokenizer, text string) {
	t.Helper()
	ids := tok.Encode(text, EncodeOptions{})
	if got := tok.Decode(ids); got != text {
		i := 0
		for i < len(got) && i < len(text) && got[i] == text[i] {
			i++
		}
		t.Errorf("round trip differs at byte %d of %d: %q vs %q", i, len(text),
			got[i:min(len(got), i+40)], text[i:min(len(text), i+40)])
	}
}

func TestRoundTripWarAndPeace(t *testing.T) {
	text := string(testutil.ReadFile(t, "text/war-and-peace.txt"))
	for _, dir := range []string{"tokenizers/qwen2.5", "tokenizers/llama3.2"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b := bpeLoad(t, dir)
			roundTrip(t, b, text)
			// Line by line must give the same ids as the cache-free path
			// of a fresh tokenizer state: encode twice, compare.
			sc := bufio.NewScanner(strings.NewReader(text[:100000]))
			for sc.Scan() {
				line := sc.Text()
				if a, c := b.Encode(line, EncodeOptions{}), b.Encode(line, EncodeOptions{}); !slices.Equal(a, c) {
					t.Fatalf("encoding %q is not stable", line)
				}
			}
		})
	}
}

// TestRoundTripRandomUTF8 checks decode(encode(x)) == x on random valid
// UTF-8 mixing ASCII, Latin, CJK, emoji, whitespace and digits.
func TestRoundTripRandomUTF8(t *testing.T) {
	b := bpeLoad(t, "tokenizers/qwen2.5")
	l := bpeLoad(t, "tokenizers/llama3.2")
	rng := rand.New(rand.NewSource(1))
	alphabet := []rune("aZ09 \t\n\r'sé東京🙂ÀΩжـ\u0301\u200b!?.,-_<|>")
	for i := 0; i < 500; i++ {
		var sb strings.Builder
		for j := rng.Intn(60); j > 0; j-- {
			if rng.Intn(8) == 0 {
				sb.WriteRune(rune(rng.Intn(0x2FFFF)))
			} else {
				sb.WriteRune(alphabet[rng.Intn(len(alphabet))])
			}
		}
		s := strings.ToValidUTF8(sb.String(), "")
		roundTrip(t, b, s)
		roundTrip(t, l, s)
	}
}

// TestMergeHeapMatchesScan compares the O(n log n) merge with the
// reference scan on long random words (the tolerance is zero: ids must be
// identical).
func TestMergeHeapMatchesScan(t *testing.T) {
	b := bpeLoad(t, "tokenizers/qwen2.5")
	rng := rand.New(rand.NewSource(2))
	letters := "aaabbcdeilnorst  0123456789éè"
	for i := 0; i < 300; i++ {
		n := bpeHeapMin + rng.Intn(400)
		var word []byte
		for len(word) < n {
			word = append(word, letters[rng.Intn(len(letters))])
		}
		s := strings.ToValidUTF8(string(word), "")
		syms1 := b.initialSymbols(nil, s)
		syms2 := slices.Clone(syms1)
		a := bpeMergeScan(b.merges, syms1, new(bpeScratch))
		h := bpeMergeHeap(b.merges, syms2, new(bpeScratch))
		if !slices.Equal(a, h) {
			t.Fatalf("heap and scan differ on %q:\n%v\n%v", s, a, h)
		}
	}
	// A very long single word stays linear-ish and round-trips.
	long := strings.Repeat("ab", 50000)
	ids := b.Encode(long, EncodeOptions{})
	if b.Decode(ids) != long {
		t.Fatal("long word round trip")
	}
}

func TestDecodeSplitsCharacter(t *testing.T) {
	b := bpeLoad(t, "tokenizers/qwen2.5")
	ids := b.Encode("🙂", EncodeOptions{})
	var joined bytes.Buffer
	for _, id := range ids {
		joined.WriteString(b.Decode([]int{id}))
	}
	if joined.String() != "🙂" {
		t.Errorf("pieces of %v join to %q", ids, joined.String())
	}
	if len(ids) > 1 && utf8.ValidString(b.Decode(ids[:1])) {
		t.Errorf("first piece of a split emoji should be a partial character")
	}
}

// BenchmarkBPEEncode encodes War and Peace as one text. "warm" keeps the
// word cache between runs; "cold" empties it first, as for a text seen
// for the first time.
func BenchmarkBPEEncode(b *testing.B) {
	text := string(testutil.ReadFile(b, "text/war-and-peace.txt"))
	for _, dir := range []string{"tokenizers/llama3.2", "tokenizers/qwen2.5", "tokenizers/phi4-mini"} {
		tok := bpeLoad(b, dir)
		for _, cold := range []bool{false, true} {
			name := filepath.Base(dir) + "/warm"
			if cold {
				name = filepath.Base(dir) + "/cold"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					if cold {
						tok.cache = newBPECache()
					}
					tok.Encode(text, EncodeOptions{})
				}
			})
		}
	}
}
