package eval

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Tokenize encodes a text as llama-perplexity does: once, whole, with the
// tokenizer's own special-token rule (EncodeOptions.AddSpecial) and special
// tokens written in the text read as plain text. bos is the id the
// tokenizer put first, or -1 when it adds no BOS.
func Tokenize(tok tokenizer.Tokenizer, text string) (ids []int, bos int, err error) {
	ids, err = tokenizer.EncodeChecked(tok, text, tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		return nil, -1, fmt.Errorf("eval: %w", err)
	}
	bos = -1
	if b := tok.BOS(); b >= 0 && len(ids) > 0 && ids[0] == b {
		bos = b
	}
	return ids, bos, nil
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
	ids, bos, err := Tokenize(tok, text)
	if err != nil {
		return Result{}, err
	}
	opts.BOS = bos
	return Perplexity(s, ids, opts)
}
