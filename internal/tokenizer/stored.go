package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Stored is a tokenizer as an artifact stores it: the bytes of one file of
// a kind Build knows.
type Stored struct {
	// Kind is "tokenizer.json", "sentencepiece" (a .model file),
	// "llama2c" (a tokenizer.bin), "gguf-metadata" (a JSON object of a
	// GGUF file's tokenizer.* keys) or KindGPT2Files (a GPT-2 layout's
	// files, StoreGPT2Dir).
	Kind string
	Data []byte
}

// Build parses the stored bytes; vocab is the model's vocabulary size
// (a llama2.c tokenizer.bin does not record its own).
func (s *Stored) Build(vocab int) (Tokenizer, error) {
	switch s.Kind {
	case "gguf-metadata":
		dec := json.NewDecoder(bytes.NewReader(s.Data))
		dec.UseNumber()
		var meta map[string]any
		if err := dec.Decode(&meta); err != nil {
			return nil, fmt.Errorf("gguf metadata: %w", err)
		}
		return FromGGUF(jsonNumbers(meta).(map[string]any))
	case "llama2c":
		return ParseLlama2C(s.Data, vocab)
	case "sentencepiece":
		return ParseSentencePiece(s.Data)
	case "tokenizer.json":
		return ParseHF(s.Data)
	case KindGPT2Files:
		return parseGPT2Stored(s.Data)
	}
	return nil, fmt.Errorf("tokenizer kind %q is not known", s.Kind)
}

// jsonNumbers turns json.Number values into int64 (integers) or float64, as
// a GGUF reader returns them.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = jsonNumbers(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = jsonNumbers(x[k])
		}
		return x
	}
	return v
}
