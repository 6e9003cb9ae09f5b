package tokenizer

import "fmt"

// FormatError reports a malformed tokenizer file. Field names the JSON
// field, line or metadata key at fault ("model.merges[12]", "line 3",
// "tokenizer.ggml.merges[7]").
type FormatError struct {
	Format string // "tokenizer.json", "merges.txt", "tiktoken", "gguf" ...
	File   string // path, or "" for in-memory input
	Field  string
	Msg    string
}

func (e *FormatError) Error() string {
	where := e.Format
	if e.File != "" {
		where += ": " + e.File
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", where, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Field, e.Msg)
}

// UnsupportedError reports a well-formed tokenizer that uses a component
// this package does not implement (a WordPiece model, a BERT normalizer, an
// unknown GGUF pre-tokenizer name).
type UnsupportedError struct {
	Format string
	File   string
	What   string
}

func (e *UnsupportedError) Error() string {
	where := e.Format
	if e.File != "" {
		where += ": " + e.File
	}
	return fmt.Sprintf("%s: unsupported: %s", where, e.What)
}
