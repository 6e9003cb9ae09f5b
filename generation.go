package aotlm

import (
	"encoding/json"
	"fmt"
)

// GenerationDefaults are a model's own sampling defaults, as its
// generation_config.json gives them (the compiler keeps them in the
// artifact). A nil field is one the model does not set.
type GenerationDefaults struct {
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

// SamplingSet says which Sampling fields a caller chose itself, so that
// GenerationDefaults.Apply leaves them alone.
type SamplingSet struct {
	Temperature, TopK, TopP, MinP, RepeatPenalty bool
}

// Apply returns s with the model's defaults in the fields chosen does not
// hold. A model that asks for greedy decoding (do_sample false) sets the
// temperature to 0 unless the caller chose one; the other defaults are
// then moot and left out.
func (g GenerationDefaults) Apply(s Sampling, chosen SamplingSet) Sampling {
	if g.DoSample != nil && !*g.DoSample && !chosen.Temperature {
		s.Temperature = 0
		return s
	}
	if g.Temperature != nil && !chosen.Temperature {
		s.Temperature = *g.Temperature
	}
	if g.TopP != nil && !chosen.TopP {
		s.TopP = *g.TopP
	}
	if g.TopK != nil && !chosen.TopK {
		s.TopK = *g.TopK
	}
	if g.MinP != nil && !chosen.MinP {
		s.MinP = *g.MinP
	}
	if g.RepetitionPenalty != nil && !chosen.RepeatPenalty {
		s.RepeatPenalty = *g.RepetitionPenalty
	}
	return s
}

// ParseGenerationConfig reads the defaults of a generation_config.json.
// Unknown fields are ignored; a known field of the wrong type, or a value
// out of its range, is an error.
func ParseGenerationConfig(data []byte) (GenerationDefaults, error) {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return GenerationDefaults{}, fmt.Errorf("generation config: %w", err)
	}
	return generationDefaults(raw)
}

// generationDefaults reads the fields of a decoded generation_config.json.
func generationDefaults(raw map[string]any) (GenerationDefaults, error) {
	var g GenerationDefaults
	num := func(key string, lo, hi float64) (*float64, error) {
		v, ok := raw[key]
		if !ok || v == nil {
			return nil, nil
		}
		f, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("generation config: %s is %T, want a number", key, v)
		}
		if !(f >= lo && f <= hi) {
			return nil, fmt.Errorf("generation config: %s %v is outside [%v, %v]", key, f, lo, hi)
		}
		return &f, nil
	}
	f32 := func(key string, lo, hi float64) (*float32, error) {
		f, err := num(key, lo, hi)
		if f == nil || err != nil {
			return nil, err
		}
		v := float32(*f)
		return &v, nil
	}
	whole := func(key string, lo, hi float64) (*int, error) {
		f, err := num(key, lo, hi)
		if f == nil || err != nil {
			return nil, err
		}
		if *f != float64(int64(*f)) {
			return nil, fmt.Errorf("generation config: %s %v is not a whole number", key, *f)
		}
		v := int(*f)
		return &v, nil
	}
	if v, ok := raw["do_sample"]; ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return g, fmt.Errorf("generation config: do_sample is %T, want true or false", v)
		}
		g.DoSample = &b
	}
	var err error
	if g.Temperature, err = f32("temperature", 0, 100); err != nil {
		return g, err
	}
	if g.TopP, err = f32("top_p", 0, 1); err != nil {
		return g, err
	}
	if g.TopK, err = whole("top_k", 0, 1<<31-1); err != nil {
		return g, err
	}
	if g.MinP, err = f32("min_p", 0, 1); err != nil {
		return g, err
	}
	if g.RepetitionPenalty, err = f32("repetition_penalty", 0, 100); err != nil {
		return g, err
	}
	if g.MaxNewTokens, err = whole("max_new_tokens", 0, 1<<31-1); err != nil {
		return g, err
	}
	return g, nil
}
