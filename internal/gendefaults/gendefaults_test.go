package gendefaults

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/sample"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestParseReadsEveryField: every known field, typed; unknown fields and
// nulls ignored.
func TestParseReadsEveryField(t *testing.T) {
	d, err := Parse(decode(t, `{"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20,
		"min_p": 0.05, "repetition_penalty": 1.1, "max_new_tokens": 512, "eos_token_id": [1, 2], "pad_token_id": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.DoSample == nil || !*d.DoSample || *d.Temperature != 0.6 || *d.TopP != 0.95 || *d.TopK != 20 ||
		*d.MinP != 0.05 || *d.RepetitionPenalty != 1.1 || *d.MaxNewTokens != 512 {
		t.Fatalf("%+v", d)
	}
	if d, err := Parse(nil); err != nil || d != (Defaults{}) {
		t.Fatalf("no defaults: %+v, %v", d, err)
	}
}

// TestParseNamesBadFields: a field of the wrong type, out of range or not
// whole is left out and named; the good ones are still read.
func TestParseNamesBadFields(t *testing.T) {
	d, err := Parse(decode(t, `{"do_sample": "yes", "temperature": "hot", "top_p": 1.5, "top_k": 2.5, "min_p": 0.1}`))
	if err == nil {
		t.Fatal("bad fields accepted")
	}
	for _, k := range []string{"do_sample", "temperature", "top_p", "top_k"} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error %q does not name %s", err, k)
		}
	}
	if d.DoSample != nil || d.Temperature != nil || d.TopP != nil || d.TopK != nil || d.MinP == nil || *d.MinP != 0.1 {
		t.Errorf("%+v", d)
	}
}

// TestApplyKeepsTheCallersChoice: defaults fill what the caller did not
// set; do_sample false means greedy unless the caller chose a temperature.
func TestApplyKeepsTheCallersChoice(t *testing.T) {
	d, err := Parse(decode(t, `{"temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.2}`))
	if err != nil {
		t.Fatal(err)
	}
	p := sample.Params{Temperature: 0.8, TopP: 1, TopK: 40, MinP: 0.1, RepeatPenalty: 1}
	d.Apply(&p, Set{TopK: true})
	want := sample.Params{Temperature: 0.6, TopP: 0.9, TopK: 40, MinP: 0.05, RepeatPenalty: 1.2}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	greedy, err := Parse(decode(t, `{"do_sample": false, "temperature": 0.6, "top_k": 20}`))
	if err != nil {
		t.Fatal(err)
	}
	p = sample.Params{Temperature: 0.8, TopK: 40}
	greedy.Apply(&p, Set{})
	if p.Temperature != 0 || p.TopK != 40 {
		t.Errorf("do_sample false: %+v", p)
	}
	p = sample.Params{Temperature: 0.8, TopK: 40}
	greedy.Apply(&p, Set{Temperature: true})
	if p.Temperature != 0.8 || p.TopK != 20 {
		t.Errorf("do_sample false with the caller's temperature: %+v", p)
	}
}
