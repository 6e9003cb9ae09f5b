package tokenizer

import (
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

func TestLlama2CTokenCount(t *testing.T) {
	for rel, want := range map[string]int{"llama2c/tokenizer.bin": 32000, "llama2c/tok512-dratman/tok512.bin": 512} {
		data := testutil.ReadFile(t, rel)
		n, err := Llama2CTokenCount(data)
		if err != nil || n != want {
			t.Errorf("%s: %d tokens, %v; want %d", rel, n, err, want)
		}
		if _, err := Llama2CTokenCount(data[:len(data)-3]); err == nil {
			t.Errorf("%s truncated: no error", rel)
		}
	}
}
