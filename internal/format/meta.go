package format

import (
	"fmt"
	"math"
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

// MetaStrings reads an array of strings.
func MetaStrings(m map[string]any, key string) ([]string, error) {
	arr, ok := m[key].([]any)
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
