package constrain

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// callFormat makes the recognizer of a Hermes-style call of one of two
// tools, each with its own argument schema.
func callFormat(t *testing.T) (Recognizer, map[string]string) {
	args := map[string]string{
		"get_weather": `{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"]}`,
		"add":         `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`,
	}
	var alts []Recognizer
	for _, name := range []string{"get_weather", "add"} {
		alts = append(alts, Sequence(`<tool_call>
{"name": "`+name+`", "arguments": `, NewSchemaJSON(compileT(t, args[name])), "}\n</tool_call>"))
	}
	return Choice(alts...), args
}

// TestCallFormatRandomWalk: random walks through a choice of two
// framed schemas end, within their budget, in a call whose arguments
// validate under the named tool's schema; the tokens cross the borders
// between the fixed text and the arguments.
func TestCallFormatRandomWalk(t *testing.T) {
	var vocab [][]byte
	for c := byte(0x20); c < 0x7f; c++ {
		vocab = append(vocab, []byte{c})
	}
	for _, p := range []string{"\n", "<tool_call>", "<tool", "_call>\n{\"", `name": "`, `get_weather", "arguments": {"`, `add`, `", "`, `{"a": 1`, "}}\n</", "}\n</tool_call>", "tool_call>", `"}}`, "city", "unit", `": "`, "Paris", `c"`, "12}"} {
		vocab = append(vocab, []byte(p))
	}
	stop := len(vocab)
	vocab = append(vocab, nil)
	r := rand.New(rand.NewPCG(8, 9))
	logits := make([]float32, len(vocab))
	names := map[string]int{}
	for walk := range 200 {
		rec, args := callFormat(t)
		budget := 80 + r.IntN(60)
		m := NewMaskFor(rec, vocab, []int{stop}, budget)
		var gen []int
		var text strings.Builder
		for len(gen) < budget {
			clear(logits)
			m.Apply(logits, gen)
			var allowed []int
			for i, l := range logits {
				if !math.IsInf(float64(l), -1) {
					allowed = append(allowed, i)
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("walk %d: nothing allowed after %q", walk, text.String())
			}
			// prefer long tokens, so that they cross the borders
			id := allowed[r.IntN(len(allowed))]
			if len(allowed) > 1 && r.IntN(2) == 0 {
				id = allowed[len(allowed)-1-r.IntN(min(len(allowed)-1, 3))]
			}
			if id == stop {
				break
			}
			gen = append(gen, id)
			text.WriteString(string(vocab[id]))
		}
		m.Apply(logits, gen)
		out := text.String()
		body, ok := strings.CutPrefix(out, "<tool_call>\n")
		body, ok2 := strings.CutSuffix(body, "\n</tool_call>")
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if !m.Done() || !ok || !ok2 || json.Unmarshal([]byte(body), &call) != nil || args[call.Name] == "" {
			t.Fatalf("walk %d (budget %d): %q is not a call", walk, budget, out)
		}
		if err := valid(validator(t, args[call.Name]), string(call.Arguments)); err != nil {
			t.Fatalf("walk %d: arguments %s of %s: %v", walk, call.Arguments, call.Name, err)
		}
		names[call.Name]++
	}
	if len(names) != 2 {
		t.Fatalf("calls made: %v, want both tools", names)
	}
}

// TestSequenceAgreesWithFeed: Try and Feed agree on every token at every
// step of a call, and Try's closing length is that of the fed state.
func TestSequenceAgreesWithFeed(t *testing.T) {
	doc := "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 12, \"b\": -3}}\n</tool_call>"
	toks := []string{"}", "}\n", "\n</", "1", "12", "<tool_call>", "x", `"a"`, "}}\n</tool_call>", "tool_call>", "-3}", "\n"}
	for n := range len(doc) + 1 {
		rec, _ := callFormat(t)
		if !rec.Feed([]byte(doc[:n])) {
			t.Fatalf("prefix %q refused", doc[:n])
		}
		for _, tok := range toks {
			l, ok := rec.Try([]byte(tok), true)
			fed, _ := callFormat(t)
			fed.Feed([]byte(doc[:n]))
			ok2 := fed.Feed([]byte(tok))
			if ok != ok2 || ok && l != fed.ClosingLen() {
				t.Fatalf("after %q, token %q: Try %v (%d), Feed %v (%d)", doc[:n], tok, ok, l, ok2, fed.ClosingLen())
			}
		}
	}
}
