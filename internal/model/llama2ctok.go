package model

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/tokenizer"
	"github.com/aotlm/aotlm/internal/userfile"
)

// loadLlama2CTokenizer loads a tokenizer.bin; vocab > 0 requires exactly
// that many tokens (the file does not record its size).
func loadLlama2CTokenizer(path string, vocab int) (tokenizer.Tokenizer, error) {
	data, err := userfile.ReadFile(path, userfile.Tokenizer)
	if err != nil {
		return nil, err
	}
	n, err := tokenizer.Llama2CTokenCount(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if vocab > 0 && n != vocab {
		return nil, fmt.Errorf("llama2.c tokenizer %s has %d tokens, the model's vocabulary is %d", path, n, vocab)
	}
	tok, err := tokenizer.ParseLlama2C(data, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}
