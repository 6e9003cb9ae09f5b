// Package model opens a model from a path as a user gives it (a GGUF file, a
// llama2.c checkpoint, a Hugging Face folder), resolves its family and its
// tokenizer, and runs it through the graph interpreter as a
// decoding.Session.
package model
