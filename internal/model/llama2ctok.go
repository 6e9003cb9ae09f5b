package model

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/aotlm/aotlm/internal/tokenizer"
)

// llama2cTokenCount counts the entries of a llama2.c tokenizer.bin (int32
// max_token_length, then per token float32 score, int32 length, bytes). The
// file does not store its size, so loading one against the wrong model
// would silently truncate it; counting first lets callers refuse that.
func llama2cTokenCount(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(data) < 4 {
		return 0, fmt.Errorf("%s: %d bytes is too short for a llama2.c tokenizer", path, len(data))
	}
	n := 0
	for off := 4; off < len(data); n++ {
		if off+8 > len(data) {
			return 0, fmt.Errorf("%s: token %d: header truncated at byte %d", path, n, off)
		}
		l := int(int32(binary.LittleEndian.Uint32(data[off+4:])))
		if l < 0 || off+8+l > len(data) {
			return 0, fmt.Errorf("%s: token %d: length %d runs past the end of the file", path, n, l)
		}
		off += 8 + l
	}
	return n, nil
}

// loadLlama2CTokenizer loads a tokenizer.bin; vocab > 0 requires exactly
// that many tokens.
func loadLlama2CTokenizer(path string, vocab int) (tokenizer.Tokenizer, error) {
	n, err := llama2cTokenCount(path)
	if err != nil {
		return nil, err
	}
	if vocab > 0 && n != vocab {
		return nil, fmt.Errorf("llama2.c tokenizer %s has %d tokens, the model's vocabulary is %d", path, n, vocab)
	}
	tok, err := tokenizer.LoadLlama2C(path, n)
	if err != nil {
		return nil, err
	}
	return tok, nil
}
