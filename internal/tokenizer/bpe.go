package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// BPE is a tokenizer pipeline in the Hugging Face tokenizers mould:
// normalizer, added tokens, pre-tokenizer, model, post-processor and
// hfDecoder. The model is byte-pair encoding (byte-level as in GPT-2, Llama 3,
// Qwen and Phi-4, or SentencePiece-style with byte fallback as in Llama 2)
// or, for tokenizer.json files that say so, Unigram. It is built by LoadHF,
// LoadDir, Load, LoadGPT2, LoadTiktoken or from GGUF metadata, and is safe
// for concurrent use.
type BPE struct {
	tokens []string         // id -> token as stored; "" for unused ids
	ids    map[string]int32 // model token as stored -> id

	// byteLevel: the vocabulary spells bytes with the GPT-2 byte alphabet.
	// Pieces then stay raw bytes; byteIDs gives each byte's id and rawIDs
	// the id of a whole token by its raw bytes.
	byteLevel bool
	byteIDs   [256]int32
	rawIDs    map[string]int32

	merges       map[uint64]bpeMerge
	ignoreMerges bool // a word found whole in the vocabulary skips merging
	byteFallback bool // unknown characters become <0xXX> tokens
	fallbackIDs  [256]int32
	unk          int32 // -1 if none
	fuseUnk      bool
	uni          *hfUnigram // set when the model is Unigram

	norm   hfNormalizer
	pre    preTokenizer
	dec    hfDecoder
	added  addedVocab
	prefix []int // post-processor ids around one sequence (AddSpecial)
	suffix []int
	bos    int
	eos    int

	cache bpeCache
}

// newBPE returns an empty pipeline with no special ids.
func newBPE() *BPE {
	b := &BPE{ids: map[string]int32{}, unk: -1, bos: -1, eos: -1, cache: newBPECache()}
	for i := range b.byteIDs {
		b.byteIDs[i] = -1
		b.fallbackIDs[i] = -1
	}
	return b
}

// Encode implements Tokenizer.
func (b *BPE) Encode(text string, opts EncodeOptions) []int {
	out := make([]int, 0, len(text)/3+4)
	if opts.AddSpecial {
		out = append(out, b.prefix...)
	}
	segs := b.added.split(nil, text, 0, opts.ParseSpecial, false)
	for _, seg := range segs {
		if seg.id >= 0 {
			out = append(out, seg.id)
			continue
		}
		s := seg.text
		if b.norm != nil {
			s = b.norm.normalize(s, normalizedLimit(len(s)))
		}
		for _, sub := range b.added.split(nil, s, seg.start, opts.ParseSpecial, true) {
			if sub.id >= 0 {
				out = append(out, sub.id)
				continue
			}
			out = b.encodeText(out, sub.text, sub.start == 0)
		}
	}
	if opts.AddSpecial {
		out = append(out, b.suffix...)
	}
	return out
}

// encodeText pre-tokenizes s and runs the model on each piece.
func (b *BPE) encodeText(out []int, s string, first bool) []int {
	if s == "" {
		return out
	}
	if b.pre == nil {
		return b.encodeWord(out, s)
	}
	preWalk(b.pre, s, first, func(piece string) {
		out = b.encodeWord(out, piece)
	})
	return out
}

// encodeWord runs the model on one pre-token.
func (b *BPE) encodeWord(out []int, word string) []int {
	if word == "" {
		return out
	}
	if b.uni != nil {
		return b.uni.encode(b, out, word)
	}
	if ids, ok := b.cache.get(word); ok {
		for _, id := range ids {
			out = append(out, int(id))
		}
		return out
	}
	if b.ignoreMerges {
		if id, ok := b.wholeID(word); ok {
			b.cache.put(word, []int32{id})
			return append(out, int(id))
		}
	}
	var stack [64]int32
	syms := b.initialSymbols(stack[:0], word)
	syms = bpeMergeSymbols(b.merges, syms)
	b.cache.put(word, syms)
	for _, id := range syms {
		out = append(out, int(id))
	}
	return out
}

// wholeID looks word up as one token.
func (b *BPE) wholeID(word string) (int32, bool) {
	if b.byteLevel {
		id, ok := b.rawIDs[word]
		return id, ok
	}
	id, ok := b.ids[word]
	return id, ok
}

// initialSymbols splits word into the ids merging starts from: one per byte
// for byte-level vocabularies, else one per character, with byte fallback or
// the unknown token for characters the vocabulary lacks.
func (b *BPE) initialSymbols(syms []int32, word string) []int32 {
	if b.byteLevel {
		for i := 0; i < len(word); i++ {
			if id := b.byteIDs[word[i]]; id >= 0 {
				syms = append(syms, id)
			}
		}
		return syms
	}
	lastUnk := false
	for i := 0; i < len(word); {
		_, size := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+size]
		i += size
		if id, ok := b.ids[ch]; ok {
			syms = append(syms, id)
			lastUnk = false
			continue
		}
		if b.byteFallback {
			okAll := true
			for j := 0; j < len(ch); j++ {
				if b.fallbackIDs[ch[j]] < 0 {
					okAll = false
				}
			}
			if okAll {
				for j := 0; j < len(ch); j++ {
					syms = append(syms, b.fallbackIDs[ch[j]])
				}
				lastUnk = false
				continue
			}
		}
		if b.unk >= 0 {
			if !(b.fuseUnk && lastUnk) {
				syms = append(syms, b.unk)
			}
			lastUnk = true
		}
	}
	return syms
}

// Decode implements Tokenizer. Special tokens are skipped; other added
// tokens appear as written; model tokens go through the hfDecoder.
func (b *BPE) Decode(ids []int) string {
	toks := make([]decToken, 0, len(ids))
	for _, id := range ids {
		if id < 0 || id >= len(b.tokens) {
			continue
		}
		if at, ok := b.added.byID[int32(id)]; ok {
			if at.Special {
				continue
			}
			toks = append(toks, decToken{text: at.Content, verbatim: true})
			continue
		}
		toks = append(toks, decToken{text: b.tokens[id]})
	}
	if b.dec != nil {
		toks = b.dec.decode(toks)
	}
	var sb strings.Builder
	for _, t := range toks {
		sb.WriteString(t.text)
	}
	return sb.String()
}

// Token implements Tokenizer.
func (b *BPE) Token(id int) string {
	if id < 0 || id >= len(b.tokens) {
		return ""
	}
	return b.tokens[id]
}

// VocabSize implements Tokenizer.
func (b *BPE) VocabSize() int { return len(b.tokens) }

// BOS implements Tokenizer.
func (b *BPE) BOS() int { return b.bos }

// EOS implements Tokenizer.
func (b *BPE) EOS() int { return b.eos }

// ID returns the id of a token as stored in the vocabulary ("Ġthe",
// "<|im_start|>"), or -1.
func (b *BPE) ID(token string) int {
	if at, ok := b.added.byContent[token]; ok {
		return int(at.ID)
	}
	if id, ok := b.ids[token]; ok {
		return int(id)
	}
	return -1
}

// AddedTokens lists the tokens matched in the text before the model runs,
// in id order.
func (b *BPE) AddedTokens() []AddedToken {
	return b.added.list()
}

// SpecialTokens lists the added tokens marked special (control tokens such
// as BOS, EOS and chat markers), in id order.
func (b *BPE) SpecialTokens() []AddedToken {
	var out []AddedToken
	for _, t := range b.added.list() {
		if t.Special {
			out = append(out, t)
		}
	}
	return out
}

// setToken stores token at id, growing the table.
func (b *BPE) setToken(id int32, tok string) {
	if int(id) >= len(b.tokens) {
		b.tokens = append(b.tokens, make([]string, int(id)+1-len(b.tokens))...)
	}
	b.tokens[id] = tok
}

// finishVocab derives the lookup tables once tokens and ids are set.
func (b *BPE) finishVocab() {
	for i := 0; i < 256; i++ {
		if id, ok := b.ids[hfByteToken(byte(i))]; ok {
			b.fallbackIDs[i] = id
		}
	}
	if !b.byteLevel {
		return
	}
	b.rawIDs = make(map[string]int32, len(b.ids))
	for tok, id := range b.ids {
		raw, ok := bpeCharsToBytes(tok)
		if ok {
			b.rawIDs[raw] = id
		}
	}
	for i := 0; i < 256; i++ {
		if id, ok := b.ids[string(bpeByteRune[i])]; ok {
			b.byteIDs[i] = id
		}
	}
}

// hfByteToken names a byte-fallback token: "<0x0A>".
func hfByteToken(c byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string(hex[c>>4]) + string(hex[c&15]) + ">"
}

// mergesMissing explains why a BPE model without merge rules cannot
// tokenize as its authors did ("" when it can): with multi-character
// tokens in the vocabulary and no rules to reach them, every text would be
// tokenized one character at a time. Added tokens do not count; a model
// that ignores merges for whole words still needs them for the others.
func (b *BPE) mergesMissing() string {
	if b.uni != nil || len(b.merges) > 0 {
		return ""
	}
	for id, t := range b.tokens {
		if _, added := b.added.byID[int32(id)]; added || t == "" {
			continue
		}
		if utf8.RuneCountInString(t) > 1 && !(strings.HasPrefix(t, "<0x") && len(t) == 6) {
			return fmt.Sprintf("empty, but the vocabulary has multi-character tokens such as %q that only merges reach", t)
		}
	}
	return ""
}
