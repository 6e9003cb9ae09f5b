package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/userfile"
)

// hfFile is the top level of a tokenizer.json file.
type hfFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type hfAddedToken struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfModel is tokenizer.json "model".
type hfModel struct {
	Type         string          `json:"type"`
	Vocab        json.RawMessage `json:"vocab"`
	Merges       json.RawMessage `json:"merges"`
	UnkToken     *string         `json:"unk_token"`
	UnkID        *int64          `json:"unk_id"`
	FuseUnk      bool            `json:"fuse_unk"`
	ByteFallback bool            `json:"byte_fallback"`
	IgnoreMerges bool            `json:"ignore_merges"`
	ContPrefix   *string         `json:"continuing_subword_prefix"`
	EndSuffix    *string         `json:"end_of_word_suffix"`
	Dropout      *float64        `json:"dropout"`
}

// hfComponent holds every field any normalizer, pre-tokenizer, decoder or
// post-processor uses; Type says which one it is.
type hfComponent struct {
	Type string `json:"type"`

	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`

	Prepend    string          `json:"prepend"`
	Pattern    json.RawMessage `json:"pattern"`
	Content    json.RawMessage `json:"content"`
	StripLeft  bool            `json:"strip_left"`
	StripRight bool            `json:"strip_right"`
	Start      int             `json:"start"`
	Stop       int             `json:"stop"`

	AddPrefixSpace *bool   `json:"add_prefix_space"`
	UseRegex       *bool   `json:"use_regex"`
	Behavior       string  `json:"behavior"`
	Invert         bool    `json:"invert"`
	Replacement    string  `json:"replacement"`
	PrependScheme  string  `json:"prepend_scheme"`
	Split          *bool   `json:"split"`
	Individual     bool    `json:"individual_digits"`
	Charsmap       *string `json:"precompiled_charsmap"`

	Single        []json.RawMessage          `json:"single"`
	SpecialTokens map[string]hfTemplateToken `json:"special_tokens"`
	Cls           []json.RawMessage          `json:"cls"`
	Sep           []json.RawMessage          `json:"sep"`
}

type hfTemplateToken struct {
	IDs []int `json:"ids"`
}

// hfPattern is {"String": "..."} or {"Regex": "..."}.
type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// hfParser carries the file name into errors.
type hfParser struct {
	file  string
	depth int // the nesting of the component being read
}

// nested is p one component deeper.
func (p hfParser) nested() hfParser {
	p.depth++
	return p
}

func (p hfParser) errf(field, format string, args ...any) error {
	return &FormatError{Format: "tokenizer.json", File: p.file, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (p hfParser) unsupported(format string, args ...any) error {
	return &UnsupportedError{Format: "tokenizer.json", File: p.file, What: fmt.Sprintf(format, args...)}
}

// LoadHF reads a Hugging Face tokenizer.json file.
func LoadHF(path string) (*BPE, error) {
	data, err := userfile.ReadFile(path, userfile.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return parseHF(data, path)
}

// ParseHF parses the contents of a tokenizer.json file.
func ParseHF(data []byte) (*BPE, error) { return parseHF(data, "") }

func parseHF(data []byte, file string) (*BPE, error) {
	p := hfParser{file: file}
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, p.errf("", "invalid JSON: %v", err)
	}
	if isNull(f.Model) {
		return nil, p.errf("model", "missing")
	}
	var m hfModel
	if err := json.Unmarshal(f.Model, &m); err != nil {
		return nil, p.errf("model", "%v", err)
	}
	b := newBPE()
	var err error
	switch m.Type {
	case "BPE", "":
		err = p.bpeModel(b, &m)
	case "Unigram":
		err = p.unigramModel(b, &m)
	default:
		return nil, p.unsupported("model type %q", m.Type)
	}
	if err != nil {
		return nil, err
	}
	for i, t := range f.AddedTokens {
		field := fmt.Sprintf("added_tokens[%d]", i)
		if t.ID == nil || *t.ID < 0 || *t.ID >= int64(len(b.tokens)+len(f.AddedTokens)+maxIDGap) {
			return nil, p.errf(field+".id", "missing or out of range")
		}
		if t.Content == "" {
			return nil, p.errf(field+".content", "empty")
		}
		id := int32(*t.ID)
		b.added.add(AddedToken{ID: id, Content: t.Content, Special: t.Special, Normalized: t.Normalized,
			LStrip: t.LStrip, RStrip: t.RStrip, SingleWord: t.SingleWord})
		if int(id) >= len(b.tokens) || b.tokens[id] == "" {
			b.setToken(id, t.Content)
		}
	}
	if b.norm, err = p.normalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	var byteLevel bool
	if b.pre, err = p.preTokenizer(f.PreTokenizer, "pre_tokenizer", &byteLevel); err != nil {
		return nil, err
	}
	if b.dec, err = p.decoder(f.Decoder, "decoder", &byteLevel); err != nil {
		return nil, err
	}
	if g := decoderGrowth(b.dec); g > limits.MaxDecoderGrowth {
		return nil, &limits.Error{What: fmt.Sprintf("tokenizer.json: decoder: its Replace steps make a token up to %d times longer", g),
			Limit: fmt.Sprintf("MaxDecoderGrowth (%d)", limits.MaxDecoderGrowth)}
	}
	if b.prefix, b.suffix, err = p.postProcessor(f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	if byteLevel && b.uni != nil {
		return nil, p.unsupported("byte-level Unigram model")
	}
	b.byteLevel = byteLevel
	if msg := b.mergesMissing(); msg != "" {
		return nil, p.errf("model.merges", "%s", msg)
	}
	b.finish()
	if len(b.prefix) > 0 {
		b.bos = b.prefix[0]
	}
	if len(b.suffix) > 0 {
		b.eos = b.suffix[len(b.suffix)-1]
	}
	return b, nil
}

func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}

// bpeModel reads a BPE model: vocab {token: id} and merges ("a b" or
// ["a", "b"]).
func (p hfParser) bpeModel(b *BPE, m *hfModel) error {
	if m.ContPrefix != nil && *m.ContPrefix != "" || m.EndSuffix != nil && *m.EndSuffix != "" {
		return p.unsupported("BPE continuing_subword_prefix/end_of_word_suffix")
	}
	var vocab map[string]int64
	if err := json.Unmarshal(m.Vocab, &vocab); err != nil {
		return p.errf("model.vocab", "%v", err)
	}
	if err := b.setVocab(vocab, func(tok string, msg string) error {
		return p.errf("model.vocab", "token %q: %s", tok, msg)
	}); err != nil {
		return err
	}
	var merges []string
	if !isNull(m.Merges) {
		var raw []json.RawMessage
		if err := json.Unmarshal(m.Merges, &raw); err != nil {
			return p.errf("model.merges", "%v", err)
		}
		merges = make([]string, len(raw))
		for i, r := range raw {
			var s string
			if json.Unmarshal(r, &s) == nil {
				merges[i] = s
				continue
			}
			var pair []string
			if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
				return p.errf(fmt.Sprintf("model.merges[%d]", i), "not a string or a pair of strings")
			}
			merges[i] = pair[0] + " " + pair[1]
		}
	}
	if err := b.setMerges(merges, func(i int, msg string) error {
		return p.errf(fmt.Sprintf("model.merges[%d]", i), "%s", msg)
	}); err != nil {
		return err
	}
	b.ignoreMerges = m.IgnoreMerges
	b.byteFallback = m.ByteFallback
	b.fuseUnk = m.FuseUnk
	if m.UnkToken != nil {
		id, ok := b.ids[*m.UnkToken]
		if !ok {
			return p.errf("model.unk_token", "%q is not in the vocabulary", *m.UnkToken)
		}
		b.unk = id
	}
	return nil
}

// maxVocab bounds token ids, and maxIDGap how far an id may lie past the
// number of entries that define ids, so a hostile file cannot make us
// allocate millions of empty slots.
const (
	maxVocab = 1 << 24
	maxIDGap = 1 << 16
)

// setVocab fills tokens and ids from a token -> id map.
func (b *BPE) setVocab(vocab map[string]int64, bad func(tok, msg string) error) error {
	for tok, id := range vocab {
		if id < 0 || id >= maxVocab || id >= int64(len(vocab)+maxIDGap) {
			return bad(tok, fmt.Sprintf("id %d out of range", id))
		}
		if tok == "" {
			return bad(tok, "empty token")
		}
		if int(id) < len(b.tokens) && b.tokens[id] != "" {
			return bad(tok, fmt.Sprintf("id %d already used by %q", id, b.tokens[id]))
		}
		b.setToken(int32(id), tok)
		b.ids[tok] = int32(id)
	}
	return nil
}

// setMerges reads merge rules "left right" in rank order. A rule whose
// parts or result are not in the vocabulary is an error.
func (b *BPE) setMerges(merges []string, bad func(i int, msg string) error) error {
	b.merges = make(map[uint64]bpeMerge, len(merges))
	for i, line := range merges {
		sp := strings.IndexByte(line, ' ')
		if sp <= 0 || sp == len(line)-1 {
			return bad(i, fmt.Sprintf("%q is not two tokens separated by a space", line))
		}
		l, r := line[:sp], line[sp+1:]
		lid, ok1 := b.ids[l]
		rid, ok2 := b.ids[r]
		mid, ok3 := b.ids[l+r]
		if !ok1 || !ok2 || !ok3 {
			return bad(i, fmt.Sprintf("%q: a part or the merged token is not in the vocabulary", line))
		}
		key := bpePairKey(lid, rid)
		if _, dup := b.merges[key]; !dup {
			b.merges[key] = bpeMerge{rank: int32(i), id: mid}
		}
	}
	return nil
}

// finish prepares the lookup tables once everything is set.
func (b *BPE) finish() {
	b.finishVocab()
	b.added.index()
	for _, t := range b.added.list() {
		b.setToken(t.ID, t.Content)
	}
}
