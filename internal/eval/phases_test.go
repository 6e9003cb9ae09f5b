package eval

import (
	"math"
	"testing"
)

// TestPhasesKL checks PerplexityPhases against closed forms: phases that
// put the peak on the same token with probabilities p1 and p2 differ by
// KL = p1 log(p1/p2) + (1-p1) log((1-p1)/(1-p2)) per token and always
// agree on the top token; a phase peaking elsewhere never agrees. Each
// phase's perplexity equals Perplexity's for it alone, under both rules.
func TestPhasesKL(t *testing.T) {
	const V = 11
	next := func(x int) int { return (x + 1) % V }
	other := func(x int) int { return (x + 2) % V }
	p1, p2 := 0.6, 0.3
	w1, w2 := peakLogit(p1, V), peakLogit(p2, V)
	tokens := make([]int, 100)
	for i := range tokens {
		tokens[i] = i % V
	}
	mk := func(nx func(int) int, w float64) *peakSession {
		return &peakSession{V: V, next: nx, w: func(int) float64 { return w }}
	}
	for _, opts := range []Options{{Ctx: 16, BOS: -1}, {Ctx: 16, Stride: 5}} {
		sess := []Session{mk(next, w1), mk(next, w1), mk(next, w2), mk(other, w1)}
		res, err := PerplexityPhases(sess, tokens, opts)
		if err != nil {
			t.Fatal(err)
		}
		for p, s := range []Session{mk(next, w1), mk(next, w1), mk(next, w2), mk(other, w1)} {
			alone, err := Perplexity(s, tokens, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res[p].PPL != alone.PPL || res[p].Tokens != alone.Tokens {
				t.Errorf("%v phase %d: ppl %v over %d tokens, alone %v over %d", opts, p, res[p].PPL, res[p].Tokens, alone.PPL, alone.Tokens)
			}
		}
		// the logits are float32: recompute p from the stored logit
		q := func(w float64) float64 {
			f := float64(float32(w))
			return math.Exp(f) / (math.Exp(f) + V - 1)
		}
		a, b := q(w1), q(w2)
		want := a*math.Log(a/b) + (1-a)*math.Log((1-a)/(1-b))
		// peak elsewhere: base's peak token has b' = (1-a)/(V-1) in the other
		lo := (1 - a) / (V - 1)
		wantOther := a*math.Log(a/lo) + lo*math.Log(lo/a) + (V-2)*lo*math.Log(lo/lo)
		checks := []struct {
			kl, top1 float64
		}{{0, 1}, {0, 1}, {want, 1}, {wantOther, 0}}
		for p, c := range checks {
			if math.Abs(res[p].KL-c.kl) > 1e-9 || res[p].Top1 != c.top1 {
				t.Errorf("%v phase %d: KL %v top1 %v, want %v and %v", opts, p, res[p].KL, res[p].Top1, c.kl, c.top1)
			}
		}
		if res[2].KLStdErr > 1e-9 || math.Abs(res[2].MaxKL-want) > 1e-9 {
			t.Errorf("constant KL: stderr %v, max %v", res[2].KLStdErr, res[2].MaxKL)
		}
	}
}

// TestPhasesErrors checks the refusals: no phase, a short text, and a
// failing phase named by its number.
func TestPhasesErrors(t *testing.T) {
	if _, err := PerplexityPhases(nil, make([]int, 100), Options{Ctx: 8}); err == nil {
		t.Error("no phases accepted")
	}
	ok := &peakSession{V: 5}
	if _, err := PerplexityPhases([]Session{ok}, make([]int, 10), Options{Ctx: 8}); err == nil {
		t.Error("a text shorter than 2 x ctx accepted")
	}
	bad := &peakSession{V: 5, err: errFake}
	_, err := PerplexityPhases([]Session{ok, bad}, make([]int, 100), Options{Ctx: 8})
	if err == nil || !containsAll(err.Error(), "phase 2", "chunk 1") {
		t.Errorf("failing phase: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !contains(s, x) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
