package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// argumentsValue turns a tool call's JSON arguments into the value a
// template sees: "" is an empty object, text that is not JSON stays a
// string.
func argumentsValue(text string) any {
	if strings.TrimSpace(text) == "" {
		return exec.Dict{Pairs: []*exec.Pair{}}
	}
	v, err := decodeOrdered(text)
	if err != nil {
		return text
	}
	return v
}

// decodeOrdered decodes JSON text as Python's json.loads does: objects
// keep their keys in order (as exec.Dict), integers stay integers and
// other numbers are floats.
func decodeOrdered(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := orderedValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("json: text after the value")
	}
	return v, nil
}

func orderedValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("json: value nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := exec.Dict{Pairs: []*exec.Pair{}}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("json: object key %v is not a string", k)
				}
				v, err := orderedValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return d, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := orderedValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("json: unexpected %v", t)
	case json.Number:
		return numberValue(string(t))
	default: // string, bool, nil
		return t, nil
	}
}

// numberValue is a JSON number as Python reads it: an int when written
// without fraction or exponent (and it fits), else a float.
func numberValue(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.Atoi(s); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("json: number %q: %w", s, err)
	}
	return f, nil
}
