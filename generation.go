package aotlm

import (
	"encoding/json"
	"fmt"

	"github.com/aotlm/aotlm/internal/gendefaults"
	"github.com/aotlm/aotlm/internal/sample"
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
	p := sample.Params(s)
	gendefaults.Defaults(g).Apply(&p, gendefaults.Set(chosen))
	return Sampling(p)
}

// ParseGenerationConfig reads the defaults of a generation_config.json.
// Unknown fields are ignored; a known field of the wrong type, or a value
// out of its range, is an error that names it.
func ParseGenerationConfig(data []byte) (GenerationDefaults, error) {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return GenerationDefaults{}, fmt.Errorf("generation config: %w", err)
	}
	return generationDefaults(raw)
}

// generationDefaults reads the fields of a decoded generation_config.json.
func generationDefaults(raw map[string]any) (GenerationDefaults, error) {
	d, err := gendefaults.Parse(raw)
	if err != nil {
		return GenerationDefaults{}, err
	}
	return GenerationDefaults(d), nil
}
