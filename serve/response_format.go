package serve

import (
	"bytes"
	"strings"

	"github.com/aotlm/aotlm/internal/constrain"
	"github.com/aotlm/aotlm/internal/modelparts"
)

// jsonFormat is what response_format asks for.
type jsonFormat struct {
	objectOnly bool
	schema     *constrain.Schema // json_schema: the compiled schema
}

// responseFormat checks response_format; it returns nil for plain text.
// json_object constrains the reply to a JSON object; json_schema to a
// document the schema accepts (constrain.Schema tells the subset; a
// schema outside it is refused, naming the keyword).
func (s *Server) responseFormat(f *responseFormat) (*jsonFormat, *apiError) {
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		if e := s.work("reading the vocabulary", func() *apiError { s.warmVocab(); return nil }); e != nil {
			return nil, e
		}
		return &jsonFormat{objectOnly: true}, nil
	case "json_schema":
		if f.JSONSchema == nil {
			return nil, badRequest("response_format", "response_format json_schema needs a json_schema field with a schema")
		}
		raw := bytes.TrimSpace(f.JSONSchema.Schema)
		if len(raw) == 0 || string(raw) == "null" {
			return nil, badRequest("response_format", "response_format.json_schema.schema is missing")
		}
		var schema *constrain.Schema
		e := s.work("compiling response_format.json_schema", func() *apiError {
			s.warmVocab()
			var err error
			if schema, err = constrain.CompileSchema(raw); err != nil {
				return badRequest("response_format", "response_format.json_schema.%v", err)
			}
			return nil
		})
		if e != nil {
			return nil, e
		}
		return &jsonFormat{schema: schema}, nil
	}
	return nil, badRequest("response_format", "response_format type %q: want text, json_object or json_schema", f.Type)
}

// name says what f keeps the reply to, for errors.
func (f *jsonFormat) name() string {
	if f.schema != nil {
		return "the schema"
	}
	return "a JSON object"
}

// tokenBytes returns the bytes each id adds to a text (computed once).
func (s *Server) tokenBytes() [][]byte {
	s.tokOnce.Do(func() {
		tok := modelparts.Tokenizer(s.m)
		if tok == nil {
			return
		}
		// decode after an anchor token, so that tokenizers that drop a
		// leading space at the start of a text keep it
		anchor := -1
		var prefix string
		if ids := tok.Encode("a", tokEncodeRaw); len(ids) > 0 {
			anchor, prefix = ids[0], tok.Decode(ids[:1])
		}
		out := make([][]byte, tok.VocabSize())
		for id := range out {
			var t string
			if anchor >= 0 {
				t = tok.Decode([]int{anchor, id})
				if after, ok := strings.CutPrefix(t, prefix); ok {
					t = after
				} else {
					t = tok.Decode([]int{id})
				}
			} else {
				t = tok.Decode([]int{id})
			}
			if t != "" {
				out[id] = []byte(t)
			}
		}
		s.tokBytes = out
	})
	return s.tokBytes
}

// mask makes the logits mask of one generation.
func (s *Server) mask(f *jsonFormat, budget int, stop []int) *constrain.Mask {
	if f.schema != nil {
		return s.maskFor(constrain.NewSchemaJSON(f.schema), budget, stop)
	}
	return constrain.NewMask(s.tokenBytes(), stop, budget, f.objectOnly)
}

// maskFor makes the logits mask that keeps one generation to r.
func (s *Server) maskFor(r constrain.Recognizer, budget int, stop []int) *constrain.Mask {
	return constrain.NewMaskFor(r, s.tokenBytes(), stop, budget)
}
