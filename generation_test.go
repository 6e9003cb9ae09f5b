package aotlm_test

import (
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
)

// TestGenerationDefaults reads a generation_config.json and applies it to
// the fields a caller did not choose; greedy (do_sample false) wins over
// the other defaults unless the caller chose a temperature.
func TestGenerationDefaults(t *testing.T) {
	g, err := aotlm.ParseGenerationConfig([]byte(`{"temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0,
		"repetition_penalty": 1.1, "max_new_tokens": 512, "bos_token_id": 1, "transformers_version": "4.51"}`))
	if err != nil {
		t.Fatal(err)
	}
	if g.MaxNewTokens == nil || *g.MaxNewTokens != 512 || g.DoSample != nil {
		t.Fatalf("parsed %+v", g)
	}
	base := aotlm.Sampling{Temperature: 0.8, TopP: 0.95, TopK: 40, MinP: 0.05, RepeatPenalty: 1, Seed: 7}
	got := g.Apply(base, aotlm.SamplingSet{TopK: true})
	want := aotlm.Sampling{Temperature: 0.6, TopP: 0.9, TopK: 40, MinP: 0, RepeatPenalty: 1.1, Seed: 7}
	if got != want {
		t.Fatalf("applied %+v, want %+v", got, want)
	}
	if got := (aotlm.GenerationDefaults{}).Apply(base, aotlm.SamplingSet{}); got != base {
		t.Fatalf("no defaults changed %+v to %+v", base, got)
	}

	greedy, err := aotlm.ParseGenerationConfig([]byte(`{"do_sample": false, "temperature": 0.6}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := greedy.Apply(base, aotlm.SamplingSet{}); got.Temperature != 0 || got.TopP != base.TopP {
		t.Fatalf("do_sample false gave %+v", got)
	}
	if got := greedy.Apply(base, aotlm.SamplingSet{Temperature: true}); got.Temperature != base.Temperature {
		t.Fatalf("a chosen temperature was replaced: %+v", got)
	}
}

// TestGenerationDefaultsRefused: a known field of the wrong type or out of
// range is an error that names it.
func TestGenerationDefaultsRefused(t *testing.T) {
	for _, c := range []struct{ json, field string }{
		{`{"temperature": "hot"}`, "temperature"},
		{`{"top_p": 1.5}`, "top_p"},
		{`{"top_k": 2.5}`, "top_k"},
		{`{"top_k": -1}`, "top_k"},
		{`{"do_sample": "yes"}`, "do_sample"},
		{`{"repetition_penalty": -1}`, "repetition_penalty"},
		{`[1, 2]`, "generation config"},
	} {
		if _, err := aotlm.ParseGenerationConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %v, want one naming %s", c.json, err, c.field)
		}
	}
}

// TestStrategyOptionsRefused: sizes out of range are refused when the
// strategy is made, not when it runs.
func TestStrategyOptionsRefused(t *testing.T) {
	if _, err := aotlm.Lookahead(aotlm.LookaheadOptions{N: 1, W: 5, G: 3}); err == nil {
		t.Error("lookahead with n-gram size 1 was taken")
	}
	if s, err := aotlm.Lookahead(aotlm.LookaheadOptions{N: 3, W: 5, G: 3}); err != nil || s.Name() != "lookahead" {
		t.Errorf("lookahead 3,5,3: %v", err)
	}
	if got := (aotlm.LookaheadOptions{N: 3, W: 5, G: 3}).Rows(); got != 16 {
		t.Errorf("rows of 3,5,3: %d, want (5+3)(3-1) = 16", got)
	}
	if _, err := aotlm.PromptLookup(aotlm.LookupOptions{NgramMin: 4, NgramMax: 2}); err == nil {
		t.Error("lookup with reversed n-gram sizes was taken")
	}
	if _, err := aotlm.PromptLookup(aotlm.LookupOptions{DraftMax: -1}); err == nil {
		t.Error("lookup with a negative draft size was taken")
	}
}
