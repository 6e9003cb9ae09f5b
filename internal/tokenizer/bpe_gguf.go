package tokenizer

import (
	"fmt"
	"math"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp defines them.
const (
	bpeTokNormal      = 1
	bpeTokUnknown     = 2
	bpeTokControl     = 3
	bpeTokUserDefined = 4
	bpeTokUnused      = 5
	bpeTokByte        = 6
)

// newGGUFBPE builds the tokenizer of a GGUF file whose tokenizer.ggml.model
// is "gpt2" (byte-level BPE) from its metadata:
//
//	tokenizer.ggml.tokens         []string, byte-level spelled
//	tokenizer.ggml.merges         []string "left right", by rank
//	tokenizer.ggml.token_type     []int (optional): control tokens become
//	                              special added tokens, user-defined ones
//	                              plain added tokens
//	tokenizer.ggml.pre            pre-tokenizer name (see pretokPreset);
//	                              missing means "default", unknown is an error
//	tokenizer.ggml.bos_token_id   / eos_token_id (optional)
//	tokenizer.ggml.add_bos_token  / add_eos_token (optional; the default
//	                              follows the pre-tokenizer as in llama.cpp)
func newGGUFBPE(meta map[string]any) (Tokenizer, error) {
	return NewGGUFBPE(meta)
}

// NewGGUFBPE is newGGUFBPE with the concrete type.
func NewGGUFBPE(meta map[string]any) (*BPE, error) {
	bad := func(field, format string, args ...any) error {
		return &FormatError{Format: "gguf", Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	tokens, err := bpeMetaStrings(meta, "tokenizer.ggml.tokens")
	if err != nil {
		return nil, bad("tokenizer.ggml.tokens", "%v", err)
	}
	if len(tokens) == 0 || len(tokens) >= maxVocab {
		return nil, bad("tokenizer.ggml.tokens", "%d tokens", len(tokens))
	}
	var types []int64
	if _, ok := meta["tokenizer.ggml.token_type"]; ok {
		if types, err = bpeMetaInts(meta, "tokenizer.ggml.token_type"); err != nil {
			return nil, bad("tokenizer.ggml.token_type", "%v", err)
		}
		if len(types) != len(tokens) {
			return nil, bad("tokenizer.ggml.token_type", "%d types for %d tokens", len(types), len(tokens))
		}
	}
	pre := ""
	if v, ok := meta["tokenizer.ggml.pre"]; ok {
		s, ok := v.(string)
		if !ok {
			return nil, bad("tokenizer.ggml.pre", "not a string")
		}
		pre = s
	}
	preset, ok := pretokPreset(pre)
	if !ok {
		return nil, &UnsupportedError{Format: "gguf", What: fmt.Sprintf("tokenizer.ggml.pre %q", pre)}
	}
	b := newBPE()
	b.byteLevel = true
	b.dec = decByteLevel{}
	b.tokens = make([]string, len(tokens))
	for i, tok := range tokens {
		b.tokens[i] = tok
		if _, dup := b.ids[tok]; !dup {
			b.ids[tok] = int32(i)
		}
		if types == nil {
			continue
		}
		switch types[i] {
		case bpeTokControl, bpeTokUnknown:
			b.added.add(AddedToken{ID: int32(i), Content: tok, Special: true})
		case bpeTokUserDefined:
			b.added.add(AddedToken{ID: int32(i), Content: tok})
		}
	}
	var merges []string
	if _, ok := meta["tokenizer.ggml.merges"]; ok {
		if merges, err = bpeMetaStrings(meta, "tokenizer.ggml.merges"); err != nil {
			return nil, bad("tokenizer.ggml.merges", "%v", err)
		}
	}
	if err := b.setMerges(merges, func(i int, msg string) error {
		return bad(fmt.Sprintf("tokenizer.ggml.merges[%d]", i), "%s", msg)
	}); err != nil {
		return nil, err
	}
	b.applyPreset(preset)
	if msg := b.mergesMissing(); msg != "" {
		return nil, bad("tokenizer.ggml.merges", "%s", msg)
	}
	b.finish()
	for _, k := range []struct {
		key string
		dst *int
	}{{"tokenizer.ggml.bos_token_id", &b.bos}, {"tokenizer.ggml.eos_token_id", &b.eos}} {
		v, ok := meta[k.key]
		if !ok {
			continue
		}
		id, ok := bpeMetaInt(v)
		if !ok || id < 0 || id >= int64(len(tokens)) {
			return nil, bad(k.key, "bad token id %v", v)
		}
		*k.dst = int(id)
	}
	addBOS, addEOS := preset.addBOS, false
	if v, ok := meta["tokenizer.ggml.add_bos_token"].(bool); ok {
		addBOS = v
	}
	if v, ok := meta["tokenizer.ggml.add_eos_token"].(bool); ok {
		addEOS = v
	}
	if addBOS && b.bos >= 0 {
		b.prefix = []int{b.bos}
	}
	if addEOS && b.eos >= 0 {
		b.suffix = []int{b.eos}
	}
	return b, nil
}

// bpeMetaStrings reads a string array stored as []any or []string.
func bpeMetaStrings(meta map[string]any, key string) ([]string, error) {
	switch v := meta[key].(type) {
	case []string:
		return v, nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d is %T, not a string", i, e)
			}
			out[i] = s
		}
		return out, nil
	case nil:
		return nil, fmt.Errorf("missing")
	default:
		return nil, fmt.Errorf("%T is not a string array", v)
	}
}

// bpeMetaInts reads an integer array stored as []any or a typed slice.
func bpeMetaInts(meta map[string]any, key string) ([]int64, error) {
	if v, ok := meta[key].([]int64); ok {
		return v, nil
	}
	n, at, ok := metaArray(meta[key])
	if !ok {
		return nil, fmt.Errorf("%T is not an integer array", meta[key])
	}
	out := make([]int64, n)
	for i := range out {
		e := at(i)
		x, ok := bpeMetaInt(e)
		if !ok {
			return nil, fmt.Errorf("element %d is %T, not an integer", i, e)
		}
		out[i] = x
	}
	return out, nil
}

func bpeMetaInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	}
	return 0, false
}
