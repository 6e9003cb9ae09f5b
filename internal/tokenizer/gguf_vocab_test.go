package tokenizer

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// readGGUFMeta reads just the metadata section of a GGUF v2/v3 file:
//
//	"GGUF" | u32 version | u64 n_tensors | u64 n_kv |
//	n_kv times: string key | u32 type | value
//
// strings are u64 length + bytes; arrays are u32 element type + u64 count
// + elements. Integers come back as int64/uint64, floats as float64.
func readGGUFMeta(b []byte) (map[string]any, error) {
	r := &ggufTestReader{b: b}
	if string(r.next(4)) != "GGUF" {
		return nil, fmt.Errorf("not a GGUF file")
	}
	r.u32()
	r.u64()
	n := r.u64()
	meta := map[string]any{}
	for i := uint64(0); i < n && r.err == nil; i++ {
		key := r.str()
		meta[key] = r.value(r.u32())
	}
	return meta, r.err
}

type ggufTestReader struct {
	b   []byte
	err error
}

func (r *ggufTestReader) next(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = fmt.Errorf("truncated")
		return make([]byte, n%64)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *ggufTestReader) u32() uint32 {
	if b := r.next(4); len(b) == 4 {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *ggufTestReader) u64() uint64 {
	if b := r.next(8); len(b) == 8 {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *ggufTestReader) str() string { return string(r.next(r.u64())) }

func (r *ggufTestReader) value(typ uint32) any {
	switch typ {
	case 0:
		return uint64(r.next(1)[0])
	case 1:
		return int64(int8(r.next(1)[0]))
	case 2:
		return uint64(binary.LittleEndian.Uint16(r.next(2)))
	case 3:
		return int64(int16(binary.LittleEndian.Uint16(r.next(2))))
	case 4:
		return uint64(r.u32())
	case 5:
		return int64(int32(r.u32()))
	case 6:
		return float64(math.Float32frombits(r.u32()))
	case 7:
		return r.next(1)[0] != 0
	case 8:
		return r.str()
	case 9:
		et, n := r.u32(), r.u64()
		if n > uint64(len(r.b)) {
			r.err = fmt.Errorf("array too long")
			return nil
		}
		arr := make([]any, n)
		for i := range arr {
			arr[i] = r.value(et)
		}
		return arr
	case 10:
		return r.u64()
	case 11:
		return int64(r.u64())
	case 12:
		return math.Float64frombits(r.u64())
	}
	r.err = fmt.Errorf("unknown type %d", typ)
	return nil
}

// TestFromGGUFStories260K reads the vocabulary embedded in stories260K.gguf,
// which PROVENANCE documents as tok512's, and checks it encodes like
// tok512.model where llama.cpp and sentencepiece agree (text without space
// runs), starting with "Once upon a time".
func TestFromGGUFStories260K(t *testing.T) {
	meta, err := readGGUFMeta(testutil.ReadFile(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(meta)
	if err != nil {
		t.Fatal(err)
	}
	sp := loadSpm(t, "llama2c/tok512-dratman/tok512.model")
	if tok.VocabSize() != 512 || tok.BOS() != 1 || tok.EOS() != 2 {
		t.Fatalf("vocab %d bos %d eos %d", tok.VocabSize(), tok.BOS(), tok.EOS())
	}
	for id := range 512 {
		if tok.Token(id) != sp.Token(id) {
			t.Fatalf("token %d: %q vs %q", id, tok.Token(id), sp.Token(id))
		}
	}
	once := tok.Encode("Once upon a time", EncodeOptions{AddSpecial: true})
	if want := sp.Encode("Once upon a time", EncodeOptions{AddSpecial: true}); !slices.Equal(once, want) {
		t.Errorf("Once upon a time: gguf %v, model %v", once, want)
	}
	// PROVENANCE: greedy ids of stories260K start 403 407 261 378 432 ("
	// Once upon a time,"); the encoder must give the same split.
	if !slices.Equal(once, []int{1, 403, 407, 261, 378}) {
		t.Errorf("Once upon a time = %v, want [1 403 407 261 378]", once)
	}
	ref := loadSpmReference(t)
	n := 0
	for _, c := range ref.Cases["tok512"] {
		if c.Text == "" || collapseSpaces(c.Text) != c.Text {
			continue
		}
		n++
		if got := tok.Encode(c.Text, EncodeOptions{}); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
	t.Logf("%d tok512 reference cases compared", n)
}

func TestFromGGUFErrors(t *testing.T) {
	sp := loadSpm(t, "llama2c/tok512-dratman/tok512.model")
	base := ggufMetaFromSpm(sp)
	with := func(key string, v any) map[string]any {
		m := map[string]any{}
		for k, x := range base {
			m[k] = x
		}
		if v == nil {
			delete(m, key)
		} else {
			m[key] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		meta map[string]any
		want string
	}{
		{"no model", with("tokenizer.ggml.model", nil), "tokenizer.ggml.model"},
		{"unknown model", with("tokenizer.ggml.model", "wordpiece-x"), `"wordpiece-x"`},
		{"no tokens", with("tokenizer.ggml.tokens", nil), "tokenizer.ggml.tokens"},
		{"token not string", with("tokenizer.ggml.tokens", []any{"a", int64(3)}), "tokenizer.ggml.tokens"},
		{"short scores", with("tokenizer.ggml.scores", []any{1.0}), "tokenizer.ggml.scores"},
		{"bad type", with("tokenizer.ggml.token_type", slices.Repeat([]any{int64(9)}, 512)), "token_type"},
		{"bos not integer", with("tokenizer.ggml.bos_token_id", 1.5), "bos_token_id"},
	} {
		_, err := FromGGUF(tc.meta)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	// -1 and its unsigned spellings mean "none", leaving the SPM default
	// BOS 1; any other id outside the vocabulary is an error naming the key.
	for _, none := range []any{int64(-1), uint64(math.MaxUint32), uint64(math.MaxUint64)} {
		if tok, err := FromGGUF(with("tokenizer.ggml.bos_token_id", none)); err != nil || tok.BOS() != 1 {
			t.Errorf("bos %v: err %v", none, err)
		}
	}
	for _, key := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id"} {
		for _, bad := range []any{uint64(512), uint64(1 << 40), int64(-2)} {
			if _, err := FromGGUF(with(key, bad)); err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "outside") {
				t.Errorf("%s = %v: %v", key, bad, err)
			}
		}
	}
	noBOS := with("tokenizer.ggml.add_bos_token", false)
	tok, err := FromGGUF(noBOS)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("Once", EncodeOptions{AddSpecial: true}); len(got) == 0 || got[0] == 1 {
		t.Errorf("add_bos_token=false still adds BOS: %v", got)
	}
}

// TestFromGGUFTypedArrays: the arrays a GGUF reader keeps typed ([]string
// tokens, []float32 scores, []int32 or []uint8 token types) build the same
// tokenizer as the []any form.
func TestFromGGUFTypedArrays(t *testing.T) {
	sp := loadSpm(t, "llama2c/tok512-dratman/tok512.model")
	base := ggufMetaFromSpm(sp)
	typed := maps.Clone(base)
	n := sp.VocabSize()
	tokens, scores, types, types8 := make([]string, n), make([]float32, n), make([]int32, n), make([]uint8, n)
	for i := range n {
		tokens[i], scores[i], types[i], types8[i] = sp.Token(i), sp.Score(i), int32(sp.Type(i)), uint8(sp.Type(i))
	}
	typed["tokenizer.ggml.tokens"], typed["tokenizer.ggml.scores"], typed["tokenizer.ggml.token_type"] = tokens, scores, types
	want, err := FromGGUF(base)
	if err != nil {
		t.Fatal(err)
	}
	text := "Once upon a time, a little girl found a ball."
	for _, tt := range []any{types, types8} {
		typed["tokenizer.ggml.token_type"] = tt
		got, err := FromGGUF(typed)
		if err != nil {
			t.Fatalf("%T: %v", tt, err)
		}
		if g, w := got.Encode(text, EncodeOptions{AddSpecial: true}), want.Encode(text, EncodeOptions{AddSpecial: true}); !slices.Equal(g, w) {
			t.Errorf("%T: %v, want %v", tt, g, w)
		}
	}
	typed["tokenizer.ggml.scores"] = scores[:10]
	if _, err := FromGGUF(typed); err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.scores") {
		t.Errorf("short typed scores: %v", err)
	}
}
