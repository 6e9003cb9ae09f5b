package aotlm

import "github.com/aotlm/aotlm/internal/sample"

// Sampling chooses each generated token from the logits. The zero value
// is greedy decoding.
type Sampling struct {
	// Temperature divides the logits; <= 0 is greedy (the most likely id,
	// the lowest on ties).
	Temperature float32
	// TopK keeps the K most likely ids (<= 0: all).
	TopK int
	// TopP keeps the smallest set of ids whose probability reaches P (0 or
	// >= 1: all).
	TopP float32
	// MinP drops the ids less likely than MinP times the best one (0: off).
	MinP float32
	// RepeatPenalty (> 1) makes ids of the last RepeatLastN tokens (0: 64)
	// less likely; 0 or 1 is off.
	RepeatPenalty float32
	RepeatLastN   int
	// PresencePenalty is subtracted once from the logit of every id already
	// generated, FrequencyPenalty once per occurrence (as OpenAI's
	// presence_penalty and frequency_penalty); 0 is off.
	PresencePenalty  float32
	FrequencyPenalty float32
	// Seed makes sampling repeatable.
	Seed uint64
}

// Validate reports a parameter outside its range.
func (s Sampling) Validate() error { return sample.Params(s).Validate() }
