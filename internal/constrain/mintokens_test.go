package constrain

import (
	"math/rand/v2"
	"testing"
)

// shortestTokens is the reference for MinTokens: a breadth-first search
// over token sequences (a text's prefix stands for its state), giving
// the fewest tokens of a complete text, or -1 when none is within limit.
func shortestTokens(newRec func() Recognizer, tokens [][]byte, limit int) int {
	if newRec().Done() {
		return 0
	}
	level := []string{""}
	seen := map[string]bool{"": true}
	for depth := 1; depth <= limit; depth++ {
		var next []string
		for _, p := range level {
			for _, t := range tokens {
				if len(t) == 0 {
					continue
				}
				s := p + string(t)
				if seen[s] {
					continue
				}
				seen[s] = true
				r := newRec()
				if !r.Feed([]byte(s)) {
					continue
				}
				if r.Done() {
					return depth
				}
				next = append(next, s)
			}
		}
		level = next
	}
	return -1
}

// TestMinTokensBound: on random vocabularies over a grammar's bytes, and
// a regex's, MinTokens never exceeds the fewest tokens a complete text
// takes (found by search), and equals it for a vocabulary of single
// bytes, where the bound is exact.
func TestMinTokensBound(t *testing.T) {
	langs := []struct {
		name string
		rec  func() Recognizer
	}{
		{"gbnf", func() Recognizer {
			return NewGrammarRecognizer(mustGBNF(t, `root ::= "ab" [0-9]{2,3} ("x" | "yz") "!"`))
		}},
		{"regex", func() Recognizer {
			g, err := CompileRegex(`(cat|dog)s? [a-c]{3}\.`)
			if err != nil {
				t.Fatal(err)
			}
			return NewGrammarRecognizer(g)
		}},
		{"schema", func() Recognizer {
			s, err := CompileSchema([]byte(`{"type":"object","properties":{"k":{"enum":["ab","c"]}},"required":["k"]}`))
			if err != nil {
				t.Fatal(err)
			}
			return NewSchemaJSON(s)
		}},
	}
	alphabet := []byte(`abcdgostxyz019 .!{}":k`)
	rng := rand.New(rand.NewPCG(7, 9))
	for _, l := range langs {
		single := make([][]byte, len(alphabet))
		for i, c := range alphabet {
			single[i] = []byte{c}
		}
		want := shortestTokens(l.rec, single, 20)
		if got := NewMaskFor(l.rec(), single, nil, 0).MinTokens(); got != want || want < 0 {
			t.Errorf("%s, single bytes: MinTokens %d, the shortest text takes %d", l.name, got, want)
		}
		for trial := range 30 {
			vocab := make([][]byte, 12)
			for i := range vocab {
				n := 1 + rng.IntN(4)
				for range n {
					vocab[i] = append(vocab[i], alphabet[rng.IntN(len(alphabet))])
				}
			}
			vocab = append(vocab, single[rng.IntN(len(single)):]...)
			exact := shortestTokens(l.rec, vocab, 8)
			got := NewMaskFor(l.rec(), vocab, nil, 0).MinTokens()
			if exact >= 0 && got > exact {
				t.Errorf("%s trial %d: MinTokens %d above the fewest tokens %d", l.name, trial, got, exact)
			}
			if got == 0 {
				t.Errorf("%s trial %d: MinTokens 0 for a language without the empty text", l.name, trial)
			}
		}
	}
	if got := NewMaskFor(NewGrammarRecognizer(mustGBNF(t, `root ::= "q"`)), [][]byte{[]byte("a")}, nil, 0).MinTokens(); got != -1 {
		t.Errorf("a vocabulary that cannot start the text: MinTokens %d, want -1", got)
	}
}
