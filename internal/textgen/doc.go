// Package textgen is text in, text out: it encodes a prompt with the
// model's tokenizer, runs a decoding strategy on a session, streams the
// decoded text as it is produced, and reports ids and timings.
package textgen
