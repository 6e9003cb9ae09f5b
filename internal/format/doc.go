// Package format defines the Checkpoint interface every weight-file reader
// implements (metadata, tensor listing, reading a tensor as float32), and the
// error types readers return for malformed input.
//
// Readers live in sub-packages, one per format: gguf, safetensors, llama2c.
// Package format/detect opens a path of any of them by sniffing its magic.
package format
