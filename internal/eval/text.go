package eval

import (
	"errors"

	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Tokenize encodes a text as llama-perplexity does: once, whole, with the
// tokenizer's own special-token rule (EncodeOptions.AddSpecial) and special
// tokens written in the text read as plain text. bos is the id the
// tokenizer put first, or -1 when it adds no BOS.
func Tokenize(tok tokenizer.Tokenizer, text string) (ids []int, bos int) {
	ids = tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
	bos = -1
	if b := tok.BOS(); b >= 0 && len(ids) > 0 && ids[0] == b {
		bos = b
	}
	return ids, bos
}

// PerplexityText tokenizes text with Tokenize and measures it with
// Perplexity. opts.BOS is set from the tokenizer: chunks start with BOS
// exactly when the tokenizer adds one, as in llama.cpp.
func PerplexityText(s Session, tok tokenizer.Tokenizer, text string, opts Options) (Result, error) {
	if tok == nil {
		return Result{}, errors.New("eval: the model has no tokenizer")
	}
	if text == "" {
		return Result{}, errors.New("eval: the text is empty")
	}
	ids, bos := Tokenize(tok, text)
	opts.BOS = bos
	return Perplexity(s, ids, opts)
}
