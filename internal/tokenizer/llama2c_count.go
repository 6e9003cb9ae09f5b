package tokenizer

import (
	"encoding/binary"
	"fmt"
)

// Llama2CTokenCount counts the entries of a llama2.c tokenizer.bin (int32
// max_token_length, then per token float32 score, int32 length, bytes). The
// format does not store its size, so loading one against the wrong model
// silently truncates it; callers compare this count with the model's
// vocabulary first.
func Llama2CTokenCount(data []byte) (int, error) {
	if len(data) < 4 {
		return 0, fmt.Errorf("llama2c tokenizer: %d bytes is too short", len(data))
	}
	n := 0
	for off := 4; off < len(data); n++ {
		if off+8 > len(data) {
			return 0, fmt.Errorf("llama2c tokenizer: token %d: header truncated at byte %d", n, off)
		}
		l := int(int32(binary.LittleEndian.Uint32(data[off+4:])))
		if l < 0 || l > len(data)-off-8 {
			return 0, fmt.Errorf("llama2c tokenizer: token %d: length %d runs past the end of the file", n, l)
		}
		off += 8 + l
	}
	return n, nil
}
