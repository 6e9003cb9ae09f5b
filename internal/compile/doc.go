// Package compile turns a model graph and its weights into an artifact the
// engine runs without knowing the architecture.
//
// For each requested AR length N it lowers the graph with the pass length
// fixed to N, so every activation gets a concrete [rows, cols] shape; it
// computes each activation's lifetime (from the step that writes it to the
// last step that reads it) and places the activations in one arena by
// greedy first-fit over those lifetimes, so the memory of dead values is
// reused. The plans (package plan) go into the artifact as blobs
// "plan/arN"; the weights are stored once, shared by all plans, in the
// layout named by the manifest ("f32": plain row-major float32 for now;
// a quantized layout adds its tag to each tensor's index entry).
//
// The model-facing entry points (CompileModel, CompileFile) read a
// checkpoint through arch and also store what rebuilds its tokenizer.
package compile
