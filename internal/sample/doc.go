// Package sample picks the next token from logits: greedy (temperature 0),
// or a seeded chain of repetition penalty, temperature, top-k, top-p and
// min-p. A Sampler reuses its buffers, so sampling allocates nothing.
package sample
