// Package eval measures models: perplexity over a text, so the error a
// quantization scheme adds is a number rather than a guess.
//
// It owns the scoring rules, not the model: Perplexity takes anything that
// turns a window of token ids into one row of logits per position (the
// graph interpreter's session, a compiled artifact's) and a token stream.
// Two rules are offered:
//
//   - LlamaCpp (the default) reproduces llama.cpp's llama-perplexity: the
//     text is tokenized once with the tokenizer's special-token rule (BOS
//     first where the model adds one), split into consecutive,
//     non-overlapping chunks of Ctx tokens (a tail shorter than Ctx is
//     dropped), each chunk is run from an empty cache with its first token
//     replaced by BOS, and only the second half of each chunk is scored:
//     row i predicts token i+1 for i in [Ctx/2, Ctx-1), which is
//     Ctx-Ctx/2-1 tokens per chunk. At least 2*Ctx tokens are required.
//   - Sliding is the sliding-window rule of the Hugging Face perplexity
//     guide: windows of Ctx tokens start every Stride tokens, and each
//     window scores only the tokens no earlier window scored, so every token
//     but the first is scored exactly once. Windows are not given a BOS.
//
// Log-softmax is computed in float64 from the float32 logits; the reported
// perplexity is exp of the mean negative log-likelihood (natural log).
package eval
