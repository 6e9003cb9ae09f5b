package aotlm

import (
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Tokenizer turns text into ids and back. A model opened from an
// artifact has the tokenizer its compiler stored; a program may give its
// own to NewModel or SetTokenizer.
type Tokenizer interface {
	// Encode tokenizes text, adding BOS (and EOS) only when opts.AddSpecial
	// is set, by the model's own rule.
	Encode(text string, opts EncodeOptions) []int
	// Decode turns ids into text; control tokens (BOS, EOS, padding) are
	// skipped.
	Decode(ids []int) string
	// Token returns the vocabulary entry of id as stored, or "" for an id
	// out of range.
	Token(id int) string
	// VocabSize is the number of ids, added tokens included.
	VocabSize() int
	// BOS and EOS are the beginning- and end-of-sequence ids, -1 if none.
	BOS() int
	EOS() int
}

// EncodeOptions controls Tokenizer.Encode.
type EncodeOptions struct {
	// AddSpecial adds the model's BOS (and EOS, where its template says so).
	AddSpecial bool
	// ParseSpecial reads special tokens written in the text (such as
	// "<|im_start|>") as their ids; when false they are plain text.
	ParseSpecial bool
}

// publicTokenizer shows one of the module's tokenizers as a Tokenizer.
type publicTokenizer struct{ t tokenizer.Tokenizer }

func (p publicTokenizer) Encode(text string, o EncodeOptions) []int {
	return p.t.Encode(text, tokenizer.EncodeOptions(o))
}
func (p publicTokenizer) Decode(ids []int) string { return p.t.Decode(ids) }
func (p publicTokenizer) Token(id int) string     { return p.t.Token(id) }
func (p publicTokenizer) VocabSize() int          { return p.t.VocabSize() }
func (p publicTokenizer) BOS() int                { return p.t.BOS() }
func (p publicTokenizer) EOS() int                { return p.t.EOS() }

// programTokenizer shows a program's Tokenizer to the module's packages.
type programTokenizer struct{ t Tokenizer }

func (p programTokenizer) Encode(text string, o tokenizer.EncodeOptions) []int {
	return p.t.Encode(text, EncodeOptions(o))
}
func (p programTokenizer) Decode(ids []int) string { return p.t.Decode(ids) }
func (p programTokenizer) Token(id int) string     { return p.t.Token(id) }
func (p programTokenizer) VocabSize() int          { return p.t.VocabSize() }
func (p programTokenizer) BOS() int                { return p.t.BOS() }
func (p programTokenizer) EOS() int                { return p.t.EOS() }

// internalTokenizer returns the module's tokenizer behind t.
func internalTokenizer(t Tokenizer) tokenizer.Tokenizer {
	switch t := t.(type) {
	case nil:
		return nil
	case publicTokenizer:
		return t.t
	}
	return programTokenizer{t}
}

// wrapTokenizer returns t as a Tokenizer.
func wrapTokenizer(t tokenizer.Tokenizer) Tokenizer {
	switch t := t.(type) {
	case nil:
		return nil
	case programTokenizer:
		return t.t
	}
	return publicTokenizer{t}
}

func init() {
	modelparts.Register(
		func(model any) modelparts.Parts {
			m := model.(*Model)
			return modelparts.Parts{Engine: m.eng, Tokenizer: m.tok, Template: m.template, Specials: m.specials}
		},
		func(t tokenizer.Tokenizer) any { return wrapTokenizer(t) },
		func(t any) tokenizer.Tokenizer {
			if t == nil {
				return nil
			}
			return internalTokenizer(t.(Tokenizer))
		})
}
