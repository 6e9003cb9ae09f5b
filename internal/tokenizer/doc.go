// Package tokenizer turns text into the token ids a model was trained with,
// and ids back into text.
//
// It reads SentencePiece .model files (BPE and unigram), llama2.c
// tokenizer.bin files, the vocabularies embedded in GGUF files, and Hugging
// Face tokenizer.json (with its pre-tokenizers, normalizers, decoders and
// added tokens), plus the GPT-2 style vocab.json/merges.txt and
// encoder.json/vocab.bpe layouts and tiktoken files.
//
// Byte-level pre-tokenization uses hand-written splitters for the known
// family patterns (GPT-2, Llama 3, Qwen2, GPT-4o/Phi-4, SmolLM), proven
// identical to the regexp2 evaluation of the same patterns on the fixtures,
// a whole book and by fuzzing; any other pattern runs through regexp2.
package tokenizer
