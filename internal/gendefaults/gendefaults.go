// Package gendefaults reads a model's own sampling defaults — the fields
// of its generation_config.json that the compiler keeps in the artifact's
// manifest — into typed values, and applies them to sampling parameters
// the caller did not set. It is the one reader of those defaults.
package gendefaults

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/sample"
)

// Defaults are a model's sampling defaults. A nil field is one the model
// does not set.
type Defaults struct {
	// DoSample false asks for greedy decoding.
	DoSample          *bool
	Temperature       *float32
	TopP              *float32
	TopK              *int
	MinP              *float32
	RepetitionPenalty *float32
	// MaxNewTokens bounds a reply's tokens.
	MaxNewTokens *int
}

// Set says which sampling parameters the caller chose itself, so that
// Apply leaves them alone.
type Set struct {
	Temperature, TopK, TopP, MinP, RepeatPenalty bool
}

// Parse reads the defaults of a decoded generation_config.json (a
// manifest's "generation"). Unknown fields are ignored. A known field of
// the wrong type, out of its range or not whole where it counts is left
// nil and named in the error; the fields read are returned either way,
// so a caller may use them and drop the error.
func Parse(raw map[string]any) (Defaults, error) {
	var d Defaults
	var errs []error
	num := func(key string, lo, hi float64) (float64, bool) {
		v, ok := raw[key]
		if !ok || v == nil {
			return 0, false
		}
		f, ok := number(v)
		if !ok {
			errs = append(errs, fmt.Errorf("generation config: %s is %T, want a number", key, v))
			return 0, false
		}
		if !(f >= lo && f <= hi) {
			errs = append(errs, fmt.Errorf("generation config: %s %v is outside [%v, %v]", key, f, lo, hi))
			return 0, false
		}
		return f, true
	}
	f32 := func(key string, lo, hi float64) *float32 {
		f, ok := num(key, lo, hi)
		if !ok {
			return nil
		}
		v := float32(f)
		return &v
	}
	whole := func(key string) *int {
		f, ok := num(key, 0, math.MaxInt32)
		if !ok {
			return nil
		}
		if f != math.Trunc(f) {
			errs = append(errs, fmt.Errorf("generation config: %s %v is not a whole number", key, f))
			return nil
		}
		v := int(f)
		return &v
	}
	if v, ok := raw["do_sample"]; ok && v != nil {
		if b, ok := v.(bool); ok {
			d.DoSample = &b
		} else {
			errs = append(errs, fmt.Errorf("generation config: do_sample is %T, want true or false", v))
		}
	}
	d.Temperature = f32("temperature", 0, 100)
	d.TopP = f32("top_p", 0, 1)
	d.TopK = whole("top_k")
	d.MinP = f32("min_p", 0, 1)
	d.RepetitionPenalty = f32("repetition_penalty", 0, 100)
	d.MaxNewTokens = whole("max_new_tokens")
	return d, errors.Join(errs...)
}

// number reads a JSON number as decoded (float64, or json.Number with
// UseNumber) or as a Go caller wrote it.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x)
	case float32:
		return float64(x), !math.IsNaN(float64(x))
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// Apply sets in p the defaults of the parameters set does not mark as
// the caller's. A model that asks for greedy decoding (do_sample false)
// sets the temperature to 0 unless the caller chose one; its other
// defaults are then moot and left out.
func (d Defaults) Apply(p *sample.Params, set Set) {
	if d.DoSample != nil && !*d.DoSample && !set.Temperature {
		p.Temperature = 0
		return
	}
	if d.Temperature != nil && !set.Temperature {
		p.Temperature = *d.Temperature
	}
	if d.TopP != nil && !set.TopP {
		p.TopP = *d.TopP
	}
	if d.TopK != nil && !set.TopK {
		p.TopK = *d.TopK
	}
	if d.MinP != nil && !set.MinP {
		p.MinP = *d.MinP
	}
	if d.RepetitionPenalty != nil && !set.RepeatPenalty {
		p.RepeatPenalty = *d.RepetitionPenalty
	}
}
