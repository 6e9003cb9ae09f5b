package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
	"golang.org/x/text/unicode/norm"
)

// No full tokenizer.json of these models is in the test data (too large),
// so these tests assemble one from the real vocab.json/merges.txt (or
// encoder.json/vocab.bpe) and the family's published tokenizer.json
// settings: Qwen2.5 uses an NFC normalizer, a Split on its regex
// (Isolated) then ByteLevel(add_prefix_space=false, use_regex=false), a
// ByteLevel decoder and post-processor; Llama 3 has no normalizer, the same
// Sequence with its own regex, ignore_merges=true, and a TemplateProcessing
// post-processor that puts <|begin_of_text|> first.

func hfAssemble(t *testing.T, dir, vocabName, mergesName string, extra map[string]any) []byte {
	t.Helper()
	var vocab map[string]int
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(dir, vocabName)), &vocab); err != nil {
		t.Fatal(err)
	}
	merges, _ := gpt2MergeLines(testutil.ReadFile(t, filepath.Join(dir, mergesName)))
	cfg, err := parseHFConfig(testutil.ReadFile(t, filepath.Join(dir, "tokenizer_config.json")), "")
	if err != nil {
		t.Fatal(err)
	}
	var added []map[string]any
	for _, a := range cfg.addedTokens() {
		added = append(added, map[string]any{"id": a.ID, "content": a.Content, "special": a.Special,
			"normalized": a.Normalized, "lstrip": a.LStrip, "rstrip": a.RStrip, "single_word": a.SingleWord})
	}
	model := map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": false,
		"fuse_unk": false, "unk_token": nil, "dropout": nil}
	doc := map[string]any{"version": "1.0", "added_tokens": added, "model": model,
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}}
	for k, v := range extra {
		if k == "ignore_merges" {
			model[k] = v
			continue
		}
		doc[k] = v
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func hfSplitThenByteLevel(pattern string) map[string]any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	}}
}

func TestHFTokenizerJSONAssembled(t *testing.T) {
	qwen := hfAssemble(t, "tokenizers/qwen2.5", "vocab.json", "merges.txt", map[string]any{
		"normalizer":     map[string]any{"type": "NFC"},
		"pre_tokenizer":  hfSplitThenByteLevel(pretokQwen2),
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	})
	llama := hfAssemble(t, "tokenizers/llama3.2", "encoder.json", "vocab.bpe", map[string]any{
		"ignore_merges": true,
		"normalizer":    nil,
		"pre_tokenizer": hfSplitThenByteLevel(pretokLlama3),
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<|begin_of_text|>": map[string]any{"id": "<|begin_of_text|>", "ids": []int{128000}, "tokens": []string{"<|begin_of_text|>"}}}},
	})
	ref := bpeEncodings(t)
	for _, tc := range []struct {
		name, fixture, vocab string
		data                 []byte
		bos                  int
	}{
		{"qwen2", "ggml-vocab-qwen2.gguf", "qwen2", qwen, -1},
		{"llama3", "ggml-vocab-llama-bpe.gguf", "llama-bpe", llama, 128000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			cases := readVocabTest(t, tc.fixture)
			cases = append(cases, ref[tc.vocab]...)
			if tc.name == "qwen2" {
				// llama.cpp skips Qwen's NFC normalizer; where NFC changes
				// the input, HF's result is llama.cpp's on the NFC text.
				plain := bpeLoad(t, "tokenizers/qwen2.5")
				for i, c := range cases {
					if nfc := norm.NFC.String(c.text); nfc != c.text {
						cases[i].ids = plain.Encode(nfc, EncodeOptions{})
					}
				}
			}
			checkCases(t, tok, cases)
			if tok.BOS() != tc.bos {
				t.Errorf("BOS = %d, want %d", tok.BOS(), tc.bos)
			}
			ids := tok.Encode("hi", EncodeOptions{AddSpecial: true})
			if (tc.bos >= 0) != (ids[0] == tc.bos) {
				t.Errorf("AddSpecial gives %v", ids)
			}
			roundTrip(t, tok, string(testutil.ReadFile(t, "text/war-and-peace.txt")[:100000]))
		})
	}
}

// spmStyleJSON is a small Llama-2-style tokenizer.json (Prepend + Replace
// normalizer, byte_fallback, fuse_unk, Replace/ByteFallback/Fuse/Strip
// decoder). Its vocabulary is made up; the expected ids follow from the BPE
// rules by hand.
func spmStyleJSON() string {
	var bytesVocab []string
	for i := 0; i < 256; i++ {
		b, _ := json.Marshal(hfByteToken(byte(i)))
		bytesVocab = append(bytesVocab, string(b)+`:`+itoa(3+i))
	}
	return `{"added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],
"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},
"pre_tokenizer":null,
"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}},
"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},
"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":true,"vocab":{"<unk>":0,"<s>":1,"</s>":2,` + strings.Join(bytesVocab, ",") +
		`,"▁":259,"h":260,"i":261,"▁h":262,"▁hi":263},"merges":["▁ h","▁h i"]}}`
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestHFSentencePieceStyle(t *testing.T) {
	b, err := ParseHF([]byte(spmStyleJSON()))
	if err != nil {
		t.Fatal(err)
	}
	got := b.Encode("hi hi!", EncodeOptions{AddSpecial: true})
	// <s> ▁hi ▁hi then '!' (0x21) by byte fallback: 3+0x21.
	want := []int{1, 263, 263, 3 + 0x21}
	if !equalInts(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if s := b.Decode(got); s != "hi hi!" {
		t.Errorf("Decode = %q", s)
	}
	if b.BOS() != 1 {
		t.Errorf("BOS = %d", b.BOS())
	}
	// é is two fallback bytes, decoded back into one character.
	if s := b.Decode(b.Encode("é", EncodeOptions{})); s != "é" {
		t.Errorf("byte fallback round trip: %q", s)
	}
}

func TestHFUnigram(t *testing.T) {
	js := `{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1],["b",-1],["ab",-1.5],["abc",-5],["c",-2]]},
"pre_tokenizer":{"type":"WhitespaceSplit"}}`
	b, err := ParseHF([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	// "ab" (-1.5) beats "a"+"b" (-2); "abc" (-5) loses to "ab"+"c" (-3.5);
	// "x" and "y" are unknown and fused into one <unk>.
	got := b.Encode("ab abc xyab", EncodeOptions{})
	want := []int{3, 3, 5, 0, 3}
	if !equalInts(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

func equalInts(a, b []int) bool { return strings.EqualFold(itoaAll(a), itoaAll(b)) }

func itoaAll(a []int) string { b, _ := json.Marshal(a); return string(b) }

// TestHFHostile checks that malformed tokenizer.json files are refused
// with an error naming the field at fault.
func TestHFHostile(t *testing.T) {
	for _, tc := range []struct{ name, json, field string }{
		{"not json", `{"model":`, ""},
		{"no model", `{}`, "model"},
		{"bad vocab id", `{"model":{"type":"BPE","vocab":{"a":-1},"merges":[]}}`, "model.vocab"},
		{"huge vocab id", `{"model":{"type":"BPE","vocab":{"a":99999999999},"merges":[]}}`, "model.vocab"},
		{"duplicate id", `{"model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}}`, "model.vocab"},
		{"merge not in vocab", `{"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":["a b"]}}`, "model.merges[0]"},
		{"merge without space", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["ab"]}}`, "model.merges[0]"},
		{"merge wrong shape", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a"]]}}`, "model.merges[0]"},
		{"unk missing", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[],"unk_token":"<unk>"}}`, "model.unk_token"},
		{"added no id", `{"added_tokens":[{"content":"x"}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, "added_tokens[0].id"},
		{"bad behavior", `{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"a"},"behavior":"Sideways"},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, "pre_tokenizer.behavior"},
		{"bad regex", `{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(("},"behavior":"Isolated"}]},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, "pre_tokenizer.pretokenizers[0].pattern"},
		{"template unknown token", `{"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}}],"special_tokens":{}},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, "post_processor.single[0]"},
		{"unigram NaN-free score", `{"model":{"type":"Unigram","vocab":[["a","x"]]}}`, "model.vocab[0]"},
		{"unigram bad unk", `{"model":{"type":"Unigram","unk_id":5,"vocab":[["a",0]]}}`, "model.unk_id"},
		{"component without type", `{"normalizer":{},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, "normalizer.type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHF([]byte(tc.json))
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			if fe.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
	_, err := ParseHF([]byte(`{"model":{"type":"WordPiece","vocab":{}}}`))
	var ue *UnsupportedError
	if !errors.As(err, &ue) {
		t.Errorf("WordPiece: %v is not an *UnsupportedError", err)
	}
}
