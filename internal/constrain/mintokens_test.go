package constrain

import (
	"math"
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

// TestMinTokensBound: on random vocabularies over a grammar's bytes, a
// regex's and a schema's, MinTokens and MinBudget equal the fewest
// tokens a complete text takes, found by brute force over token
// sequences.
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
		// the byte count a request with room is accepted by is never below
		// the exact minimum when every byte is a token
		if bb := NewMaskFor(l.rec(), single, nil, 0).ByteBudget(); bb < want {
			t.Errorf("%s, single bytes: ByteBudget %d below the fewest tokens %d", l.name, bb, want)
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
			if exact >= 0 && got != exact {
				t.Errorf("%s trial %d: MinTokens %d, the fewest tokens are %d", l.name, trial, got, exact)
			}
			if mb := NewMaskFor(l.rec(), vocab, nil, 0).MinBudget(); exact >= 0 && mb != exact {
				t.Errorf("%s trial %d: MinBudget %d, the fewest tokens are %d", l.name, trial, mb, exact)
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

// TestMinBudget: with a budget of MinBudget the mask lets the first
// token through and, over a vocabulary holding the single bytes, keeps
// a generation complete within the budget; one token less allows only
// the stop id.
func TestMinBudget(t *testing.T) {
	g := mustGBNF(t, `root ::= "The " ("cat" | "dog") " sat on the " [a-z]{2,4} "."`)
	vocab := [][]byte{nil, []byte("The cat"), []byte(" sat on"), []byte(" the "), []byte("mat."), []byte("The")}
	for c := byte(' '); c <= 'z'; c++ {
		vocab = append(vocab, []byte{c})
	}
	mb := NewMaskFor(NewGrammarRecognizer(g), vocab, []int{0}, 0).MinBudget()
	mt := NewMaskFor(NewGrammarRecognizer(g), vocab, []int{0}, 0).MinTokens()
	if mb < mt || mb <= 1 {
		t.Fatalf("MinBudget %d, MinTokens %d", mb, mt)
	}
	allowed := func(m *Mask, gen []int) []int {
		logits := make([]float32, len(vocab))
		m.Apply(logits, gen)
		var ok []int
		for i, l := range logits {
			if !math.IsInf(float64(l), -1) {
				ok = append(ok, i)
			}
		}
		return ok
	}
	if ok := allowed(NewMaskFor(NewGrammarRecognizer(g), vocab, []int{0}, mb-1), nil); len(ok) != 1 || ok[0] != 0 {
		t.Errorf("budget %d: allowed %v, want only the stop id", mb-1, ok)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		m := NewMaskFor(NewGrammarRecognizer(g), vocab, []int{0}, mb)
		var gen []int
		for len(gen) < mb {
			ok := allowed(m, gen)
			id := ok[rng.IntN(len(ok))]
			if id == 0 {
				break
			}
			gen = append(gen, id)
		}
		allowed(m, gen)
		if !m.Done() {
			t.Fatalf("trial %d: budget %d left the text incomplete after %v", trial, mb, gen)
		}
	}
}
