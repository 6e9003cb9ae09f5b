package constrain

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestJSONAgreesWithEncodingJSON: on valid documents and their
// corruptions, a complete feed is accepted exactly when encoding/json
// accepts the text (within the whitespace and depth limits), and every
// prefix of a valid document is accepted.
func TestJSONAgreesWithEncodingJSON(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `0`, `-0.5e+10`, `"a\"b\\c\u00e9"`, `true`, `false`, `null`,
		`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, `[1, 2.5, -3e2, "x", {"y": []}]`,
		`{"k" : "v" , "n":[ ]}`, `123`, `[0]`, `{"a":{"b":{"c":[[[1]]]}}}`,
	}
	r := rand.New(rand.NewPCG(1, 2))
	var cases []string
	for _, d := range docs {
		cases = append(cases, d)
		for range 30 {
			b := []byte(d)
			i := r.IntN(len(b))
			switch r.IntN(3) {
			case 0:
				const bytes = "{}[],:\"\\0123456789-+.eEtfnlu ax"
				b[i] = bytes[r.IntN(len(bytes))]
			case 1:
				b = append(b[:i], b[i+1:]...)
			case 2:
				const bytes = "{}[],:\"0-.e"
				b = append(b[:i], append([]byte{bytes[r.IntN(len(bytes))]}, b[i:]...)...)
			}
			cases = append(cases, string(b))
		}
	}
	for _, c := range cases {
		j := NewJSON(false)
		got := j.Feed([]byte(c)) && j.Done()
		want := json.Valid([]byte(c)) && !strings.Contains(c, "   ")
		if got != want {
			t.Errorf("%q: recognizer %v, encoding/json %v", c, got, want)
		}
	}
	for _, d := range docs {
		for n := range len(d) {
			if j := NewJSON(false); !j.Feed([]byte(d[:n])) {
				t.Errorf("prefix %q of %q refused", d[:n], d)
			}
		}
	}
}

// TestClosing: every prefix of a valid document, completed with Closing,
// is valid JSON.
func TestClosing(t *testing.T) {
	docs := []string{`{"a":[1,{"b":"c\u00e9\n"}],"d":-1.5e-3,"e":true}`, `[[["x"]], {"k": null}]`}
	for _, d := range docs {
		for n := range len(d) + 1 {
			for _, obj := range []bool{false, true} {
				if obj && d[0] != '{' {
					continue
				}
				j := NewJSON(obj)
				if !j.Feed([]byte(d[:n])) {
					t.Fatalf("prefix %q refused", d[:n])
				}
				full := d[:n] + j.Closing()
				if !json.Valid([]byte(full)) {
					t.Errorf("prefix %q + closing %q = %q is not JSON", d[:n], j.Closing(), full)
				}
				if j.Feed([]byte(j.Closing())); !j.Done() {
					t.Errorf("prefix %q + closing is not done", d[:n])
				}
			}
		}
	}
	if c := NewJSON(true).Closing(); c != "{}" {
		t.Errorf("empty object-only closing %q", c)
	}
}

// TestObjectOnly refuses a top-level value that is not an object.
func TestObjectOnly(t *testing.T) {
	for _, s := range []string{`[]`, `"x"`, `1`, `true`} {
		if NewJSON(true).Feed([]byte(s)) {
			t.Errorf("%q accepted as an object", s)
		}
	}
	if j := NewJSON(true); !j.Feed([]byte(` {"a": [1]}`)) || !j.Done() {
		t.Error(`{"a": [1]} refused`)
	}
}

// TestMaskRandomWalk draws random allowed tokens from a small vocabulary
// with a budget: every walk ends in valid JSON, through a stop id.
func TestMaskRandomWalk(t *testing.T) {
	vocab := []string{"{", "}", "[", "]", ",", ":", `"`, "a", "b c", "l", "r", "s", "f", `\`, "n", "u", "0", "1", "-", ".", "e", "t", "true", "null",
		`{"`, `":`, `"}`, " ", "\n", "x\"", "12", "é"}
	tokens := make([][]byte, len(vocab)+1)
	for i, v := range vocab {
		tokens[i] = []byte(v)
	}
	stop := len(vocab) // an id with no text that ends generation
	r := rand.New(rand.NewPCG(3, 4))
	for walk := range 300 {
		budget := 4 + r.IntN(40)
		m := NewMask(tokens, []int{stop}, budget, walk%2 == 0)
		var gen []int
		var text strings.Builder
		logits := make([]float32, len(tokens))
		for len(gen) < budget {
			for i := range logits {
				logits[i] = r.Float32()
			}
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
			id := allowed[r.IntN(len(allowed))]
			if id == stop {
				break
			}
			gen = append(gen, id)
			text.WriteString(vocab[id])
		}
		m.Apply(logits, gen)
		if !json.Valid([]byte(text.String())) || !m.Done() {
			t.Fatalf("walk %d (budget %d): %q is not complete JSON", walk, budget, text.String())
		}
		if walk%2 == 0 && !strings.HasPrefix(strings.TrimSpace(text.String()), "{") {
			t.Fatalf("walk %d: object-only gave %q", walk, text.String())
		}
	}
}

func TestClosingLen(t *testing.T) {
	d := `{"a":[1,{"b\u00":"c\u00e9\n"}],"d":-1.5e-3,"e":tru`
	for n := range len(d) + 1 {
		j := NewJSON(true)
		if !j.Feed([]byte(d[:n])) {
			continue
		}
		if j.ClosingLen() != len(j.Closing()) {
			t.Errorf("after %q: ClosingLen %d, Closing %q", d[:n], j.ClosingLen(), j.Closing())
		}
	}
}

// TestJSONGrowth: after any prefix, no byte raises the closing length
// by more than Growth (which the mask relies on to skip budget checks).
func TestJSONGrowth(t *testing.T) {
	d := `{"a":[1,{"b\u00e9":"c\u00e9\n"}],"d":-1.5e-3,"e":true, "f": [[], {}, null]}`
	for n := range len(d) + 1 {
		for _, obj := range []bool{false, true} {
			j := NewJSON(obj)
			if !j.Feed([]byte(d[:n])) {
				t.Fatalf("prefix %q refused", d[:n])
			}
			before := j.ClosingLen()
			for c := range 256 {
				if after, ok := j.Try([]byte{byte(c)}, true); ok && after > before+j.Growth() {
					t.Errorf("after %q, %q raises the closing from %d to %d", d[:n], byte(c), before, after)
				}
			}
		}
	}
}
