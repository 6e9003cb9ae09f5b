package format

import (
	"fmt"
	"math"
	"reflect"
)

// MetaInt reads an integer metadata value of any integer or integral float type.
func MetaInt(m map[string]any, key string) (int64, bool) {
	switch v := m[key].(type) {
	case int64:
		return v, true
	case uint64:
		if v > math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	case int:
		return int64(v), true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), true
		}
	}
	return 0, false
}

// MetaFloat reads a numeric metadata value as float64.
func MetaFloat(m map[string]any, key string) (float64, bool) {
	switch v := m[key].(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case int:
		return float64(v), true
	}
	return 0, false
}

// MetaString reads a string metadata value.
func MetaString(m map[string]any, key string) (string, bool) {
	s, ok := m[key].(string)
	return s, ok
}

// MaxList bounds the arrays List converts: lists of per-layer settings
// and sections, never a vocabulary.
const MaxList = 1 << 16

// List reads an array metadata value as []any: a JSON array as it is, a
// typed slice (a GGUF array) with its elements widened like scalar metadata
// (int64, uint64, float64). A typed slice of more than MaxList elements is
// not a list of settings and reads as absent (false).
func List(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.Len() > MaxList {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		e := rv.Index(i)
		switch e.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[i] = e.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[i] = e.Uint()
		case reflect.Float32, reflect.Float64:
			out[i] = e.Float()
		default:
			out[i] = e.Interface()
		}
	}
	return out, true
}

// MetaStrings reads an array of strings.
func MetaStrings(m map[string]any, key string) ([]string, error) {
	if s, ok := m[key].([]string); ok {
		return s, nil
	}
	arr, ok := List(m[key])
	if !ok {
		return nil, fmt.Errorf("metadata %q is not an array", key)
	}
	out := make([]string, len(arr))
	for i, v := range arr {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("metadata %q[%d] is not a string", key, i)
		}
		out[i] = s
	}
	return out, nil
}

// Metadata keys a Hugging Face folder's reader adds from a
// sentence-transformers layout (modules.json): MetaSentencePooling is the
// pooling of its Pooling module ("mean", "cls" or "last"),
// MetaSentenceDense the list of its Dense modules after the pooling, in
// order, each the module's config.json ("in_features", "out_features",
// "bias", "activation_function") and its weight named
// "<path>.linear.weight" in the checkpoint.
const (
	MetaSentencePooling = "sentence_transformers.pooling"
	MetaSentenceDense   = "sentence_transformers.dense"
)
