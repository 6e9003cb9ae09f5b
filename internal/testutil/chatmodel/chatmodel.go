// Package chatmodel builds, at test time, a tiny random-weight chat model
// with a real tokenizer, chat template and a long context, for tests of
// chat features (tool calls, reasoning, long prompts) whose replies'
// quality does not matter.
//
// Qwen3 writes a Qwen3-shaped Hugging Face folder (2 layers, hidden 64, 4
// query and 2 key/value heads of 16, q/k norms, embeddings and output head
// of the real 151,936-row Qwen3 vocabulary) with the Qwen3 tokenizer and its
// <think> chat template from the shared test data (tokenizers/qwen2.5 for
// vocab.json and merges.txt, tokenizers/qwen3 for tokenizer_config.json),
// and compiles it with a context of 4,096 positions. Only the weights are
// random (tinymodel, seed 1): the prompts are tokenized and rendered
// exactly as a released Qwen3 model's are. The output head is not tied to
// the embeddings (Qwen3-0.6B ties them): random tied weights would make
// the model repeat its last token, while a separate random head leaves the
// logits close together, so a test's logit_bias decides what it says.
package chatmodel

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// Qwen3 token ids of the special tokens the chat template writes.
const (
	Qwen3EndOfText = 151643 // <|endoftext|>
	Qwen3ImStart   = 151644 // <|im_start|>
	Qwen3ImEnd     = 151645 // <|im_end|>
	Qwen3ThinkOpen = 151667 // <think>
	Qwen3ThinkEnd  = 151668 // </think>
)

// Qwen3Ctx is the context (KV cache positions) Qwen3 compiles.
const Qwen3Ctx = 4096

// Qwen3Config is the shape of the Qwen3 test model.
func Qwen3Config() tinymodel.Config {
	return tinymodel.Config{HiddenSize: 64, IntermediateSize: 128, NumLayers: 2, NumHeads: 4,
		NumKVHeads: 2, HeadDim: 16, VocabSize: 151936, MaxPositions: 40960, RMSNormEps: 1e-6,
		RopeTheta: 1e6, QKNorm: true,
		BOSTokenID: Qwen3EndOfText, EOSTokenID: Qwen3ImEnd}
}

// Qwen3 writes the Qwen3 test model's Hugging Face folder into dir/hf,
// compiles it (prefill passes of 64 tokens, context Qwen3Ctx) into
// dir/qwen3-chat.aot and returns that path. When the tokenizer files are
// missing the test is skipped, or fails under CI (testutil.Path).
func Qwen3(t testing.TB, dir string) string {
	t.Helper()
	vocab := testutil.Path(t, "tokenizers/qwen2.5/vocab.json")
	cfg := testutil.Path(t, "tokenizers/qwen3/tokenizer_config.json")
	path, err := BuildQwen3(dir, filepath.Dir(vocab), filepath.Dir(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// BuildQwen3 is Qwen3 without a test: vocabDir holds vocab.json and
// merges.txt, configDir tokenizer_config.json.
func BuildQwen3(dir, vocabDir, configDir string) (string, error) {
	hf := filepath.Join(dir, "hf")
	if err := tinymodel.WriteLlama(hf, Qwen3Config(), 1); err != nil {
		return "", fmt.Errorf("chatmodel: qwen3 weights: %w", err)
	}
	for _, f := range []string{filepath.Join(vocabDir, "vocab.json"), filepath.Join(vocabDir, "merges.txt"),
		filepath.Join(configDir, "tokenizer_config.json")} {
		if err := copyFile(f, filepath.Join(hf, filepath.Base(f))); err != nil {
			return "", fmt.Errorf("chatmodel: qwen3 tokenizer: %w", err)
		}
	}
	out := filepath.Join(dir, "qwen3-chat.aot")
	if err := compile.CompileFile(hf, out, compile.Options{ARLens: []int{64}, Ctx: Qwen3Ctx}); err != nil {
		return "", fmt.Errorf("chatmodel: compile qwen3: %w", err)
	}
	return out, nil
}
