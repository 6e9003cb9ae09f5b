// Package hf gathers what aotlm knows about Hugging Face: the Hub client
// that pulls repositories into the shared Hugging Face cache lives in
// internal/hf/hub.
package hf
