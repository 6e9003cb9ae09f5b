package tokenizer

import (
	"fmt"
	"math"
	"reflect"
	"slices"
)

// GGUF metadata keys of an embedded vocabulary (ggml's gguf constants).
const (
	ggufKeyModel       = "tokenizer.ggml.model"
	ggufKeyTokens      = "tokenizer.ggml.tokens"
	ggufKeyScores      = "tokenizer.ggml.scores"
	ggufKeyTokenType   = "tokenizer.ggml.token_type"
	ggufKeyBOS         = "tokenizer.ggml.bos_token_id"
	ggufKeyEOS         = "tokenizer.ggml.eos_token_id"
	ggufKeyUnk         = "tokenizer.ggml.unknown_token_id"
	ggufKeyPad         = "tokenizer.ggml.padding_token_id"
	ggufKeyAddBOS      = "tokenizer.ggml.add_bos_token"
	ggufKeyAddEOS      = "tokenizer.ggml.add_eos_token"
	ggufKeySpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// FromGGUF builds the tokenizer described by a GGUF file's metadata
// (tokenizer.ggml.*). Values are as a GGUF reader returns them: string,
// bool, int64/uint64, float64, and arrays as typed slices or []any.
func FromGGUF(meta map[string]any) (Tokenizer, error) {
	model, ok := meta[ggufKeyModel].(string)
	if !ok {
		return nil, fmt.Errorf("gguf vocab: metadata %q missing or not a string", ggufKeyModel)
	}
	switch model {
	case "llama":
		return sentencePieceFromGGUF(meta)
	case "gpt2":
		return newGGUFBPE(meta)
	default:
		return nil, fmt.Errorf("gguf vocab: %s %q is not supported", ggufKeyModel, model)
	}
}

// sentencePieceFromGGUF builds the "llama" (SentencePiece BPE with scores)
// vocabulary as llama.cpp's SPM tokenizer uses it: the space prefix from
// add_space_prefix (default true), no whitespace cleanup, any token may be a
// merge result, unknown characters become <0xXX> BYTE tokens (the unknown
// token for bytes the vocabulary lacks).
func sentencePieceFromGGUF(meta map[string]any) (*SentencePiece, error) {
	tokens, err := ggufStrings(meta, ggufKeyTokens)
	if err != nil {
		return nil, err
	}
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("gguf vocab: %s is empty", ggufKeyTokens)
	}
	scores, err := ggufFloats(meta, ggufKeyScores, n)
	if err != nil {
		return nil, err
	}
	types, err := ggufTypes(meta, ggufKeyTokenType, n)
	if err != nil {
		return nil, err
	}
	m := &spmModelProto{
		pieces:     make([]spmPiece, n),
		trainer:    spmDefaultTrainer(),
		normalizer: spmDefaultNormalizer(),
	}
	m.trainer.modelType = ModelBPE
	m.normalizer.removeExtraWS = false
	if v, ok := meta[ggufKeySpacePrefix].(bool); ok {
		m.normalizer.addDummyPrefix = v
	}
	unk := -1
	if v, ok, err := ggufID(meta, ggufKeyUnk, n); err != nil {
		return nil, err
	} else if ok {
		unk = v
	}
	var byteCount int
	for i, text := range tokens {
		typ := types[i]
		if typ == PieceByte {
			if _, ok := spmPieceByte(text); !ok {
				typ = PieceNormal // llama.cpp would reject; read it as text
			} else {
				byteCount++
			}
		}
		if typ == PieceUnknown {
			if unk < 0 {
				unk = i
			}
			if i != unk {
				typ = PieceControl
			}
		}
		m.pieces[i] = spmPiece{text: text, score: scores[i], typ: typ}
	}
	if unk < 0 {
		unk = 0 // llama.cpp's default special_unk_id for SPM
	}
	m.pieces[unk].typ = PieceUnknown
	m.trainer.unkID = unk
	m.trainer.byteFallback = byteCount > 0
	for _, id := range []struct {
		key string
		dst *int
	}{{ggufKeyBOS, &m.trainer.bosID}, {ggufKeyEOS, &m.trainer.eosID}, {ggufKeyPad, &m.trainer.padID}} {
		if v, ok, err := ggufID(meta, id.key, n); err != nil {
			return nil, err
		} else if ok {
			*id.dst = v
		}
	}
	sp, err := newGGUFSentencePiece(m)
	if err != nil {
		return nil, fmt.Errorf("gguf vocab: %w", err)
	}
	sp.addBOS = true
	if v, ok := meta[ggufKeyAddBOS].(bool); ok {
		sp.addBOS = v
	}
	if v, ok := meta[ggufKeyAddEOS].(bool); ok {
		sp.addEOS = v
	}
	return sp, nil
}

// newGGUFSentencePiece builds the tables with llama.cpp's rules rather than
// sentencepiece's: every token (first occurrence of its text) can be a
// merge result, duplicates are allowed, and byte fallback works with
// whichever <0xXX> tokens exist.
func newGGUFSentencePiece(m *spmModelProto) (*SentencePiece, error) {
	sp := &SentencePiece{
		pieces:       m.pieces,
		modelType:    ModelBPE,
		normal:       make(map[string]int32, len(m.pieces)),
		reserved:     make(map[string]int32),
		unkID:        m.trainer.unkID,
		byteFallback: m.trainer.byteFallback,
		unkSurface:   m.trainer.unkSurface,
	}
	var user, control []string
	for i := range sp.byteIDs {
		sp.byteIDs[i] = int32(sp.unkID)
	}
	for i, p := range m.pieces {
		if _, dup := sp.normal[p.text]; !dup && p.text != "" {
			sp.normal[p.text] = int32(i)
		}
		switch p.typ {
		case PieceByte:
			if b, ok := spmPieceByte(p.text); ok {
				sp.byteIDs[b] = int32(i)
			}
		case PieceUserDefined:
			user = append(user, p.text)
		case PieceControl:
			if _, dup := sp.reserved[p.text]; !dup && p.text != "" {
				sp.reserved[p.text] = int32(i)
				control = append(control, p.text)
			}
		}
	}
	sp.bosID = sp.specialID(m.trainer.bosID)
	sp.eosID = sp.specialID(m.trainer.eosID)
	sp.padID = sp.specialID(m.trainer.padID)
	sp.special = newSpmPrefixSet(control)
	sp.norm = spmNormalizer{
		addDummyPrefix: m.normalizer.addDummyPrefix,
		escapeWS:       true,
		user:           newSpmPrefixSet(user),
	}
	return sp, nil
}

// metaArray reads an array metadata value, []any or a typed slice as a
// GGUF reader returns arrays: its length and a reader of element i (boxed
// one at a time, so a large typed array is never widened whole).
func metaArray(v any) (n int, at func(int) any, ok bool) {
	if l, ok := v.([]any); ok {
		return len(l), func(i int) any { return l[i] }, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return 0, nil, false
	}
	return rv.Len(), func(i int) any { return rv.Index(i).Interface() }, true
}

// ggufStrings reads an array of strings.
func ggufStrings(meta map[string]any, key string) ([]string, error) {
	if s, ok := meta[key].([]string); ok {
		return slices.Clone(s), nil
	}
	n, at, ok := metaArray(meta[key])
	if !ok {
		return nil, fmt.Errorf("gguf vocab: metadata %q missing or not an array", key)
	}
	out := make([]string, n)
	for i := range out {
		v := at(i)
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("gguf vocab: metadata %q[%d] is %T, not a string", key, i, v)
		}
		out[i] = s
	}
	return out, nil
}

// ggufFloats reads an optional array of n numbers (all 0 when absent).
func ggufFloats(meta map[string]any, key string, n int) ([]float32, error) {
	out := make([]float32, n)
	raw, present := meta[key]
	if !present {
		return out, nil
	}
	if f32, ok := raw.([]float32); ok && len(f32) == n {
		return slices.Clone(f32), nil
	}
	m, at, ok := metaArray(raw)
	if !ok || m != n {
		return nil, fmt.Errorf("gguf vocab: metadata %q is not an array of %d numbers", key, n)
	}
	for i := range out {
		v := at(i)
		f, ok := ggufNumber(v)
		if !ok {
			return nil, fmt.Errorf("gguf vocab: metadata %q[%d] is %T, not a number", key, i, v)
		}
		out[i] = float32(f)
	}
	return out, nil
}

// ggufTypes reads the optional token_type array (all NORMAL when absent).
func ggufTypes(meta map[string]any, key string, n int) ([]PieceType, error) {
	out := make([]PieceType, n)
	for i := range out {
		out[i] = PieceNormal
	}
	raw, present := meta[key]
	if !present {
		return out, nil
	}
	m, at, ok := metaArray(raw)
	if !ok || m != n {
		return nil, fmt.Errorf("gguf vocab: metadata %q is not an array of %d integers", key, n)
	}
	for i := range out {
		v := at(i)
		f, ok := ggufNumber(v)
		if !ok || f != math.Trunc(f) {
			return nil, fmt.Errorf("gguf vocab: metadata %q[%d] is %v, not an integer", key, i, v)
		}
		if f < float64(PieceNormal) || f > float64(PieceByte) {
			return nil, fmt.Errorf("gguf vocab: metadata %q[%d]: unknown token type %v", key, i, f)
		}
		out[i] = PieceType(f)
	}
	return out, nil
}

// ggufID reads an optional token id below n.
func ggufID(meta map[string]any, key string, n int) (int, bool, error) {
	raw, present := meta[key]
	if !present {
		return 0, false, nil
	}
	f, ok := ggufNumber(raw)
	if !ok || f != math.Trunc(f) {
		return 0, false, fmt.Errorf("gguf vocab: metadata %q = %v is not an integer token id", key, raw)
	}
	if f == -1 || f == math.MaxUint32 || f == math.MaxUint64 {
		// writers store -1 (or its unsigned spelling) for "no such token"
		return 0, false, nil
	}
	if f < 0 || f >= float64(n) {
		return 0, false, fmt.Errorf("gguf vocab: metadata %q = %v is outside the vocabulary of %d tokens", key, raw, n)
	}
	return int(f), true, nil
}

// ggufNumber reads any numeric metadata value. The tokenizer keeps its own
// reader instead of format.MetaInt/MetaFloat so that it does not depend on
// tensor code.
func ggufNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case uint8:
		return float64(x), true
	case int16:
		return float64(x), true
	case uint16:
		return float64(x), true
	}
	return 0, false
}
