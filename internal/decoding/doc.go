// Package decoding runs generation strategies over a Session, the small
// interface every backend (the graph interpreter, a compiled artifact)
// implements: prefill a prompt, decode one token, report logits. It owns
// stop conditions and timing; it knows nothing of models or tokenizers.
package decoding
