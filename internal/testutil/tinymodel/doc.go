// Package tinymodel generates tiny random Llama models for tests: a Hugging
// Face folder (config.json + model.safetensors, optionally sharded with
// model.safetensors.index.json) and the same weights as a llama2.c file.
// With Config.QKNorm the folder is a Qwen3 model (per-head q and k norms).
//
// Weights are drawn from a seeded generator, so a (Config, seed) pair
// always gives the same model: linear weights ~ N(0, 1/fan_in), RMSNorm
// gains ~ U(0.5, 1.5), embeddings ~ N(0, 1). Llama returns the values the
// files hold (already rounded to the stored dtype), so a test can run an
// independent forward pass on exactly the weights a reader sees.
package tinymodel
