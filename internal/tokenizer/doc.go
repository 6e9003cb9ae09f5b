// Package tokenizer turns text into the token ids a model was trained with,
// and ids back into text.
//
// It reads SentencePiece .model files (BPE and unigram), llama2.c
// tokenizer.bin files, the vocabularies embedded in GGUF files, and Hugging
// Face tokenizer.json (with its pre-tokenizers, normalizers, decoders and
// added tokens), plus the GPT-2 style vocab.json/merges.txt and
// encoder.json/vocab.bpe layouts and tiktoken files.
package tokenizer
