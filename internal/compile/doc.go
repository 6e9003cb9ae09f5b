// Package compile turns a model graph and its weights into an artifact the
// engine runs without knowing the architecture.
//
// For each requested AR length N it lowers the graph with the pass length
// fixed to N, so every activation gets a concrete [rows, cols] shape; it
// computes each activation's lifetime (from the step that writes it to the
// last step that reads it) and places the activations in one arena by
// greedy first-fit over those lifetimes, so the memory of dead values is
// reused. The plans (package plan) go into the artifact as blobs
// "plan/arN"; the weights are stored once, shared by all plans. A model's
// weights stay float32 ("f32" in the manifest); a quantized model folder
// (package qmodel) keeps its w8, lpbq and q4 tensors as integers in the
// layouts of plan.WeightLayout, tagged per tensor in the index, and the
// manifest says "mixed" (f16-scheme tensors are stored as float32).
//
// With Options.KV "u8" the KV cache is stored as uint8 (plan.KVCache):
// calib.go runs the float32 graph interpreter over a calibration sequence
// (a text file's tokens, given ids, or 128 tokens the model generates
// greedily from BOS) and takes clip = max |x| per layer and key/value head,
// scale = clip/127.
//
// The model-facing entry points (CompileModel, CompileFile) read a
// checkpoint or quantized folder and also store what rebuilds its
// tokenizer.
package compile
