// Package load opens whatever model a user names — a compiled artifact
// (.aot), a Hugging Face checkpoint folder, a quantized folder, a GGUF
// file, a llama2.c checkpoint — as a runtime model, compiling a
// checkpoint into the compile cache first with the compile defaults it
// defines once (ARLen, Ctx, KV). A cached model's artifact is opened
// once: the open that runs it is the one that finds it damaged.
//
// It also reads a checkpoint's float weights and tokenizer for the
// commands that work on float models (quantize, ppl phases), and unpacks
// the built-in demo model.
package load
