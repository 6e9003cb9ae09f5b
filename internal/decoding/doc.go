// Package decoding chooses the tokens of a generation.
//
// Generate runs plain decoding over a Session, the small interface the
// graph interpreter (internal/model) and a compiled artifact's session
// implement: prefill a prompt, decode one token, report logits. It owns
// the stop conditions (stop ids, MaxTokens, a full context) and the
// timings, and knows nothing of tokenizers.
//
// The strategies choose several tokens a pass on a Target, which an
// *engine.Session implements (passes of several rows under a mask, Commit
// of a chain of them, Rewind): Lookahead (lookahead decoding), Lookup
// (prompt lookup) and Draft (a draft model's guesses). A Strategy's Start
// makes the Decoder of one generation; a target it cannot speed up (a
// recurrent model) gets a plain decoder and a note in its Stats. Unless
// Adaptive.Off, a decoder times its passes and decodes plainly for a
// while when guessing costs more per token than plain passes do. With
// greedy sampling every strategy chooses the tokens plain decoding
// chooses; with sampling, draft speculation keeps the sampler's
// distribution.
package decoding
