package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
)

// TestCompileRefusesContradictoryGGUFs: a GGUF whose metadata contradicts
// its tensors or holds a value no model can run with is refused by
// compile with one line naming the field, and nothing is written: a block
// count below the blocks present, a non-finite epsilon or rope factor, a
// BOS or EOS id outside the vocabulary (the BOS was dropped before, while
// the EOS was refused).
func TestCompileRefusesContradictoryGGUFs(t *testing.T) {
	for _, c := range []struct {
		name, want string
		edit       func(kv []gguf.KV) []gguf.KV
	}{
		{"block count", "llama.block_count", func(kv []gguf.KV) []gguf.KV { return setKV(kv, "llama.block_count", uint32(3)) }},
		{"eps inf", "layer_norm_rms_epsilon", func(kv []gguf.KV) []gguf.KV {
			return setKV(kv, "llama.attention.layer_norm_rms_epsilon", float32(math.Inf(1)))
		}},
		{"rope factor nan", "llama.rope.scaling.factor", func(kv []gguf.KV) []gguf.KV {
			return setKV(setKV(kv, "llama.rope.scaling.type", "linear"), "llama.rope.scaling.factor", float32(math.NaN()))
		}},
		{"freq base nan", "llama.rope.freq_base", func(kv []gguf.KV) []gguf.KV {
			return setKV(kv, "llama.rope.freq_base", float32(math.NaN()))
		}},
		{"bos", "bos_token_id", func(kv []gguf.KV) []gguf.KV { return setKV(kv, "tokenizer.ggml.bos_token_id", uint32(100000)) }},
		{"eos", "eos_token_id", func(kv []gguf.KV) []gguf.KV { return setKV(kv, "tokenizer.ggml.eos_token_id", uint32(512)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := rewriteGGUF(t, c.edit)
			out := filepath.Join(t.TempDir(), "m.aot")
			code, _, stderr := runCLI(t, "compile", in, "-o", out)
			if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an artifact was written")
			}
		})
	}
	// -1 written unsigned is "no BOS", not an error
	in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV { return setKV(kv, "tokenizer.ggml.bos_token_id", uint32(math.MaxUint32)) })
	if code, _, stderr := runCLI(t, "compile", in, "-o", filepath.Join(t.TempDir(), "m.aot")); code != 0 {
		t.Errorf("bos 0xFFFFFFFF: exit %d: %s", code, stderr)
	}
}
