package passport

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	if p, err := Parse(nil); p != nil || err != nil {
		t.Errorf("no passport: %v, %v", p, err)
	}
	if p, err := Parse(json.RawMessage("null")); p != nil || err != nil {
		t.Errorf("null: %v, %v", p, err)
	}
	for _, bad := range []string{`{"phases":[]}`, `{"phases":[{"phase":"float","ppl":0}]}`, `{"phases":[{"ppl":6}]}`, `[1]`} {
		if _, err := Parse(json.RawMessage(bad)); err == nil || !strings.Contains(err.Error(), "passport") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
	in := Passport{Recipe: "lpbq4-h6", Text: "t.txt", TextSHA256: "ab12cd34ef56ab12", Ctx: 256, Chunks: 2, Tokens: 254,
		Phases: []Phase{{Name: "float", PPL: 6, SameTop1: 1}, {Name: "qdq", PPL: 6.3, KL: 0.05, SameTop1: 0.9}}}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := p.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"recipe lpbq4-h6", "text t.txt", "ctx 256, 2 chunks, 254 tokens", "qdq       ppl 6.3000 (+5.00%)  KL 0.05000  same top-1 90.00%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
}
