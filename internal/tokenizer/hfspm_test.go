package tokenizer

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// The Llama 2 tokenizer.json used below is not a copied file: it is
// ASSEMBLED in memory from testdata llama2c/tokenizer.model (the Llama 2
// 32000-piece SentencePiece BPE model) the way the Hugging Face slow->fast
// converter (transformers convert_slow_tokenizer.py, SpmConverter with
// LlamaConverter) builds it:
//
//   - vocab: every piece with its id;
//   - merges: for every piece, every split at a character boundary into two
//     pieces that are both in the vocabulary; within one piece the splits are
//     ordered by (id of left, id of right); then all merges are stably sorted
//     by (score of the merged piece, length of left, length of right),
//     descending. The scores are the model's, except that <unk>, <s> and </s>
//     count as 0 (LlamaConverter.vocab);
//   - model: BPE with unk_token "<unk>", fuse_unk and byte_fallback;
//   - added tokens <unk>, <s>, </s>, special and not normalized;
//   - the pipeline HF publishes for meta-llama/Llama-2-7b-hf: normalizer
//     Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer, decoder
//     Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)],
//     post-processor TemplateProcessing "<s> $A".
//
// hfspmMetaspace gives the newer spelling of the same pipeline (legacy=false):
// no normalizer and a Metaspace pre-tokenizer with prepend_scheme "first" and
// split false.

// hfspmMerges lists the converter's merges for sp.
func hfspmMerges(sp *SentencePiece) [][2]string {
	n := sp.VocabSize()
	vocab := make(map[string]int, n)
	for id := 0; id < n; id++ {
		vocab[sp.Token(id)] = id
	}
	score := func(id int) float32 {
		if id < 3 {
			return 0
		}
		return sp.Score(id)
	}
	type merge struct {
		l, r         string
		score        float32
		lenL, lenR   int
		lid, rid, at int
	}
	var all []merge
	for id := 0; id < n; id++ {
		piece := sp.Token(id)
		var local []merge
		for i := range piece {
			if i == 0 {
				continue
			}
			l, r := piece[:i], piece[i:]
			lid, ok1 := vocab[l]
			rid, ok2 := vocab[r]
			if ok1 && ok2 {
				local = append(local, merge{l: l, r: r, score: score(id),
					lenL: utf8.RuneCountInString(l), lenR: utf8.RuneCountInString(r), lid: lid, rid: rid})
			}
		}
		sort.SliceStable(local, func(i, j int) bool {
			if local[i].lid != local[j].lid {
				return local[i].lid < local[j].lid
			}
			return local[i].rid < local[j].rid
		})
		all = append(all, local...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if a.lenL != b.lenL {
			return a.lenL > b.lenL
		}
		return a.lenR > b.lenR
	})
	out := make([][2]string, len(all))
	for i, m := range all {
		out[i] = [2]string{m.l, m.r}
	}
	return out
}

// hfspmJSON assembles the Llama 2 tokenizer.json from sp (see above);
// metaspace selects the newer pre-tokenizer spelling.
func hfspmJSON(t testing.TB, sp *SentencePiece, metaspace bool) []byte {
	t.Helper()
	vocab := make(map[string]int, sp.VocabSize())
	for id := 0; id < sp.VocabSize(); id++ {
		vocab[sp.Token(id)] = id
	}
	var added []map[string]any
	for id, tok := range []string{"<unk>", "<s>", "</s>"} {
		added = append(added, map[string]any{"id": id, "content": tok, "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": false, "special": true})
	}
	str := func(s string) map[string]any { return map[string]any{"String": s} }
	var normalizer, preTokenizer any
	if metaspace {
		preTokenizer = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	} else {
		normalizer = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": str(" "), "content": "▁"},
		}}
	}
	doc := map[string]any{
		"version":       "1.0",
		"added_tokens":  added,
		"normalizer":    normalizer,
		"pre_tokenizer": preTokenizer,
		"post_processor": map[string]any{
			"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
			},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{1}, "tokens": []string{"<s>"}}},
		},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": str("▁"), "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true,
			"vocab": vocab, "merges": hfspmMerges(sp),
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var hfspmCache struct {
	once sync.Once
	json [2][]byte
}

// hfspmLlama2 returns the assembled Llama 2 tokenizer.json, parsed.
func hfspmLlama2(t testing.TB, metaspace bool) *BPE {
	t.Helper()
	sp := loadSpm(t, "llama2c/tokenizer.model")
	hfspmCache.once.Do(func() {
		hfspmCache.json[0] = hfspmJSON(t, sp, false)
		hfspmCache.json[1] = hfspmJSON(t, sp, true)
	})
	i := 0
	if metaspace {
		i = 1
	}
	b, err := ParseHF(hfspmCache.json[i])
	if err != nil {
		t.Fatalf("ParseHF(assembled Llama 2 tokenizer.json): %v", err)
	}
	return b
}

var hfspmVariants = []struct {
	name      string
	metaspace bool
}{{"normalizer", false}, {"metaspace", true}}

// TestHFSpmAssembled checks the assembled file's shape: every piece kept,
// the merge count, special ids and the first merges (the highest-scored
// pieces of Llama 2 are "▁t" and "er").
func TestHFSpmAssembled(t *testing.T) {
	sp := loadSpm(t, "llama2c/tokenizer.model")
	merges := hfspmMerges(sp)
	if len(merges) < 30000 {
		t.Fatalf("%d merges, want at least one per merged piece", len(merges))
	}
	if merges[0] != [2]string{"▁", "t"} {
		t.Errorf("first merge %q, want [▁ t] (piece %q has the best score)", merges[0], sp.Token(260))
	}
	b := hfspmLlama2(t, false)
	if b.VocabSize() != 32000 || b.BOS() != 1 || b.EOS() != -1 || b.unk != 0 {
		t.Errorf("vocab %d bos %d eos %d unk %d, want 32000 1 -1 0", b.VocabSize(), b.BOS(), b.EOS(), b.unk)
	}
	for id := 0; id < sp.VocabSize(); id++ {
		if b.Token(id) != sp.Token(id) {
			t.Fatalf("Token(%d) = %q, want %q", id, b.Token(id), sp.Token(id))
		}
	}
	t.Logf("%d merges", len(merges))
}

// hfspmWant is what the assembled tokenizer must give for text, given the
// sentencepiece ids of it and the SentencePiece encoder for other text. The
// Prepend normalizer always adds "▁", as sentencepiece's dummy prefix does.
// HF's Metaspace pre-tokenizer adds it only when the text does not already
// start with "▁" (tokenizers metaspace.rs: "if !normalized.get().starts_with
// (self.replacement)"), so for text opening with a space its leading space
// becomes the prefix: the result is sentencepiece's encoding of the rest, and
// of a lone space the piece "▁".
func hfspmWant(sp *SentencePiece, metaspace bool, text string, ids []int) []int {
	if !metaspace || !strings.HasPrefix(text, " ") {
		return ids
	}
	if text == " " {
		return []int{sp.PieceID("▁")}
	}
	return sp.Encode(text[1:], EncodeOptions{})
}

// TestHFSpmReference encodes every Llama 2 case of
// reference/sentencepiece-encodings.json (made by the sentencepiece library
// without BOS) through the assembled tokenizer.json and decodes the listed
// ids back.
func TestHFSpmReference(t *testing.T) {
	ref := loadSpmReference(t)
	cases := ref.Cases["llama2-32000"]
	if len(cases) != 165 {
		t.Fatalf("%d llama2-32000 cases, want 165", len(cases))
	}
	sp := loadSpm(t, "llama2c/tokenizer.model")
	for _, v := range hfspmVariants {
		t.Run(v.name, func(t *testing.T) {
			b := hfspmLlama2(t, v.metaspace)
			exact, shifted, decOK := 0, 0, 0
			for _, c := range cases {
				got := b.Encode(c.Text, EncodeOptions{ParseSpecial: true})
				want := hfspmWant(sp, v.metaspace, c.Text, c.IDs)
				switch {
				case !slices.Equal(got, want):
					t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, want)
				case slices.Equal(got, c.IDs):
					exact++
				default:
					shifted++
				}
				withBOS := b.Encode(c.Text, EncodeOptions{AddSpecial: true, ParseSpecial: true})
				if len(withBOS) == 0 || withBOS[0] != 1 || !slices.Equal(withBOS[1:], got) {
					t.Errorf("Encode(%q, AddSpecial) = %v, want <s> then %v", c.Text, withBOS, got)
				}
				if dec := b.Decode(c.IDs); dec == c.Decoded {
					decOK++
				} else {
					t.Errorf("Decode(%v) = %q, want %q", c.IDs, dec, c.Decoded)
				}
				if dec := b.Decode(append([]int{1}, c.IDs...)); dec != c.Decoded {
					t.Errorf("Decode(<s> %v) = %q, want %q", c.IDs, dec, c.Decoded)
				}
			}
			// 15 cases open with a space; only the Metaspace spelling
			// treats them differently.
			wantShifted := 0
			if v.metaspace {
				wantShifted = 15
			}
			if shifted != wantShifted {
				t.Errorf("%d cases differ from sentencepiece by the leading-space rule, want %d", shifted, wantShifted)
			}
			t.Logf("encode %d/%d identical to sentencepiece (+%d by HF's Metaspace rule), decode %d/%d",
				exact, len(cases), shifted, decOK, len(cases))
		})
	}
}

// TestHFSpmLlamaCppFixture checks llama.cpp's llama-spm fixture (inputs get
// llama.cpp's add_space_prefix, which the Prepend normalizer gives; no BOS).
func TestHFSpmLlamaCppFixture(t *testing.T) {
	texts, want := readLlamaCppFixture(t, "tokenizer-fixtures/ggml-vocab-llama-spm.gguf")
	if len(texts) != 46 {
		t.Fatalf("%d cases, want 46", len(texts))
	}
	sp := loadSpm(t, "llama2c/tokenizer.model")
	for _, v := range hfspmVariants {
		t.Run(v.name, func(t *testing.T) {
			b := hfspmLlama2(t, v.metaspace)
			ok := 0
			for i, text := range texts {
				got := b.Encode(text, EncodeOptions{ParseSpecial: true})
				if slices.Equal(got, hfspmWant(sp, v.metaspace, text, want[i])) {
					ok++
				} else {
					t.Errorf("Encode(%q)\n got %v\nwant %v", text, got, want[i])
				}
			}
			t.Logf("%d/%d match", ok, len(texts))
		})
	}
}

// TestHFSpmWarAndPeace compares the assembled tokenizer.json with the
// SentencePiece encoder (itself checked against the sentencepiece library
// above) on 2000 lines of text/war-and-peace.txt, and checks the round trip.
func TestHFSpmWarAndPeace(t *testing.T) {
	lines := warAndPeaceLines(t, 2000)
	sp := loadSpm(t, "llama2c/tokenizer.model")
	b := hfspmLlama2(t, false)
	bad, tokens := 0, 0
	for _, l := range lines {
		want := sp.Encode(l, EncodeOptions{})
		got := b.Encode(l, EncodeOptions{})
		tokens += len(got)
		if !slices.Equal(got, want) {
			bad++
			if bad <= 5 {
				t.Errorf("Encode(%q)\n got %v\nwant %v", l, got, want)
			}
		}
		if dec := b.Decode(got); dec != l {
			t.Errorf("round trip of %q gave %q", l, dec)
		}
	}
	t.Logf("%d lines, %d tokens, %d differ from SentencePiece", len(lines), tokens, bad)
}

// FuzzHFSpm checks on any text that the assembled tokenizer.json encodes as
// the SentencePiece encoder does and round-trips valid UTF-8 without "▁"
// (which decodes to a space).
func FuzzHFSpm(f *testing.F) {
	for _, c := range loadSpmReference(f).Cases["llama2-32000"][:40] {
		f.Add(c.Text)
	}
	for _, s := range []string{"", " ", "\xff\xfe", "\x00", "a\u0301", "▁▁x", "<s></s><unk>", "\t\t  \n"} {
		f.Add(s)
	}
	sp := loadSpm(f, "llama2c/tokenizer.model")
	b := hfspmLlama2(f, false)
	f.Fuzz(func(t *testing.T, s string) {
		got := b.Encode(s, EncodeOptions{})
		if want := sp.Encode(s, EncodeOptions{}); utf8.ValidString(s) && !slices.Equal(got, want) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", s, got, want)
		}
		dec := b.Decode(got)
		if utf8.ValidString(s) && !strings.Contains(s, "▁") && dec != s {
			t.Errorf("round trip of %q gave %q", s, dec)
		}
	})
}
