package tokenizer

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/testutil"
)

// fuzzSeedsText adds a few real lines and the llama.cpp fixture inputs.
func fuzzSeedsText(f *testing.F) {
	inp := string(testutil.ReadFile(f, "tokenizer-fixtures/ggml-vocab-qwen2.gguf.inp"))
	for _, s := range strings.Split(inp, "\n__ggml_vocab_test__\n") {
		f.Add([]byte(s))
	}
	wp := testutil.ReadFile(f, "text/war-and-peace.txt")
	f.Add(wp[10000:10400])
	f.Add([]byte("<|im_start|>user\n\xff\xfe<tool_call> \u00a0\u3000 12345\r\n"))
	f.Add([]byte(strings.Repeat("a", 3000)))
}

// FuzzBPEEncode: any bytes, valid UTF-8 or not, must encode without panic
// and decode back exactly (byte-level vocabularies lose nothing).
func FuzzBPEEncode(f *testing.F) {
	fuzzSeedsText(f)
	q := bpeLoad(f, "tokenizers/qwen2.5")
	l := bpeLoad(f, "tokenizers/llama3.2")
	f.Fuzz(func(t *testing.T, data []byte) {
		s := string(data)
		for _, b := range []*BPE{q, l} {
			ids := b.Encode(s, EncodeOptions{})
			if got := b.Decode(ids); got != s {
				t.Fatalf("round trip %q -> %v -> %q", s, ids, got)
			}
			b.Encode(s, EncodeOptions{ParseSpecial: true, AddSpecial: true})
		}
	})
}

// FuzzBPEDecode: any ids (out of range ones included) decode without
// panic, and the text re-encodes to ids that decode to the same text.
func FuzzBPEDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add(binary.LittleEndian.AppendUint32(nil, 151644))
	f.Add(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 9707), 128000))
	q := bpeLoad(f, "tokenizers/qwen2.5")
	f.Fuzz(func(t *testing.T, data []byte) {
		var ids []int
		for len(data) >= 4 {
			ids = append(ids, int(int32(binary.LittleEndian.Uint32(data))))
			data = data[4:]
		}
		s := q.Decode(ids)
		if again := q.Decode(q.Encode(s, EncodeOptions{})); again != s {
			t.Fatalf("decode %v = %q, re-encoded decodes to %q", ids, s, again)
		}
	})
}

// FuzzSplit: every pre-tokenizer preset must cut any input into pieces
// that concatenate back to it, and splitting is deterministic.
func FuzzSplit(f *testing.F) {
	fuzzSeedsText(f)
	names := []string{"default", "llama-bpe", "qwen2", "gpt-2", "smollm", "gpt-4o", "falcon", "deepseek-coder"}
	var pres []preTokenizer
	for _, n := range names {
		p, _ := pretokPreset(n)
		pres = append(pres, p.preTokenizer())
	}
	pres = append(pres, preMetaspace{replacement: "▁", scheme: metaspaceFirst, split: true},
		preDigits{individual: false}, prePunctuation{behavior: pretokMergedWithPrevious})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := string(data)
		for i, p := range pres {
			pieces := p.preSplit(nil, s, true)
			joined := strings.Join(pieces, "")
			if i < len(names) && joined != s {
				t.Fatalf("%s: pieces %q do not rebuild %q", names[i], pieces, s)
			}
			for _, pc := range pieces {
				if pc == "" {
					t.Fatalf("pre-tokenizer %d gave an empty piece for %q", i, s)
				}
			}
		}
	})
}

// FuzzParseHF: tokenizer.json and tokenizer_config.json parsing never
// panics, and what parses encodes and decodes without panic.
func FuzzParseHF(f *testing.F) {
	f.Add([]byte(spmStyleJSON()))
	f.Add([]byte(`{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1]]},"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"first"}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]],"ignore_merges":true},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":true}}`))
	f.Add(testutil.ReadFile(f, "tokenizers/qwen2.5/tokenizer_config.json"))
	f.Add(testutil.ReadFile(f, "tokenizers/phi4-mini/tokenizer_config.json"))
	f.Add(nestedJSON("decoder", limits.MaxTokenizerNesting+2))
	f.Add(nestedJSON("normalizer", 4))
	f.Add(replaceJSON(`{"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"Regex": "b*"}, "content": "ccccc"}, {"type": "Replace", "pattern": {"String": "c"}, "content": "cccc"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if b, err := ParseHF(data); err == nil {
			// an encoding may stop at a limit (an error, not a panic)
			ids, _ := EncodeChecked(b, "ab a\xffb <s> é", EncodeOptions{AddSpecial: true, ParseSpecial: true})
			b.Decode(append(ids, -1, 1<<30))
		}
		_, _ = parseHFConfig(data, "")
	})
}

// FuzzParseVocabFiles: the GPT-2 layout and tiktoken parsers never panic.
// The seeds are the heads of the real Llama 3.2 files.
func FuzzParseVocabFiles(f *testing.F) {
	tk := testutil.ReadFile(f, "tokenizers/llama3.2/tokenizer.model")
	f.Add([]byte(`{"a":0,"b":1,"ab":2}`), []byte("#version: 0.2\na b\n"), tk[:600])
	f.Add([]byte(`{"Ġ":0,"t":1,"Ġt":2}`), head(testutil.ReadFile(f, "tokenizers/llama3.2/vocab.bpe"), 3), []byte("IQ== 0\nIg== 1\n"))
	f.Fuzz(func(t *testing.T, vocab, merges, tiktoken []byte) {
		if b, err := parseGPT2(vocab, merges, "vocab.json", "merges.txt"); err == nil {
			b.applyPreset(mustPreset("gpt-2"))
			b.finish()
			s := "a b\xffab"
			b.Decode(b.Encode(s, EncodeOptions{}))
		}
		if b, err := parseTiktoken(tiktoken, "tokenizer.model"); err == nil {
			b.applyPreset(mustPreset("llama-bpe"))
			b.finish()
			b.Decode(b.Encode("hello\xff!", EncodeOptions{}))
		}
		isTiktoken(tiktoken)
	})
}

func head(data []byte, lines int) []byte {
	i := 0
	for n := 0; n < lines && i < len(data); n++ {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			return data
		}
		i += j + 1
	}
	return data[:i]
}

func mustPreset(name string) bpePreset {
	p, ok := pretokPreset(name)
	if !ok {
		panic(name)
	}
	return p
}
