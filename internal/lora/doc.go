// Package lora reads low-rank adapters and applies them to a model's
// linear weights: Hugging Face PEFT folders (adapter_config.json and
// adapter_model.safetensors, with rsLoRA scaling, per-module rank and
// alpha patterns and DoRA magnitudes) and llama.cpp's GGUF adapters
// (general.type "adapter", adapter.type "lora"). An adapter resolves
// against a model (Resolve) into one low-rank pair per targeted linear,
// under the model's canonical weight names and in the base weights'
// row layout; Merge folds a pair into its weight, and Delta adds the
// low-rank product to a linear's output rows at run time.
package lora
