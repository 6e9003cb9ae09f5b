// Package testutil locates the shared test data (real models, tokenizers and
// outside references) for tests.
//
// The data folder is $AOTLM_TESTDATA, or ../shared/testdata relative to the
// repository root. A test that needs a file calls Path; when the file is
// missing the test is skipped with a message on a user's machine, and fails
// under CI (CI=true), where a missing fixture must never pass silently.
//
// Two subpackages make models at test time instead of storing them:
//
//   - tinymodel writes tiny random Llama or Qwen3 checkpoints (a Hugging
//     Face folder or a llama2.c file) of any shape;
//   - chatmodel builds a tiny random Qwen3-shaped model with the real
//     Qwen3 tokenizer (151,936 ids), its <think> chat template and a
//     context of 4,096 positions (chatmodel.Qwen3(t, dir) returns the
//     compiled artifact, in a few seconds), for tests of tool calls,
//     reasoning and prompts of thousands of tokens through a real
//     template.
package testutil
