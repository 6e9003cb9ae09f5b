// Package arch knows model families: it maps a checkpoint's configuration
// (HF config.json, GGUF metadata, llama2.c header) to a Config, maps the
// checkpoint's tensor names to canonical (Hugging Face) names, and builds the
// forward-pass graph of the family. One file per family; shared blocks in
// blocks.go. Nothing here runs a model: graphs are evaluated by package graph's
// interpreter or compiled into an artifact.
package arch
