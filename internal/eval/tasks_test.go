package eval

import (
	"math"
	"strings"
	"testing"
)

// letters is a toy encoder: BOS 0, then one id per letter a..z (1..26);
// other characters are dropped.
func letters(s string) []int {
	ids := []int{0}
	for _, c := range s {
		if c >= 'a' && c <= 'z' {
			ids = append(ids, int(c-'a')+1)
		}
	}
	return ids
}

// chain is a fake model that predicts the next letter with probability p.
func chain(p float64) *peakSession {
	const V = 27
	w := peakLogit(p, V)
	return &peakSession{V: V, next: func(x int) int { return (x + 1) % V }, w: func(int) float64 { return w }, ctx: 64}
}

// TestMultipleChoice checks the scores against closed forms: after the
// common prefix "abc", an ending's log-probability is log p for each token
// that continues the alphabet and log((1-p)/(V-1)) for any other; the sum
// and the mean pick different endings when a long right ending competes
// with a short wrong one.
func TestMultipleChoice(t *testing.T) {
	const p, V = 0.9, 27
	hit := -peakNLL(peakLogit(p, V), V)
	miss := math.Log((1 - 1/(1+float64(V-1)*math.Exp(-float64(float32(peakLogit(p, V)))))) / float64(V-1))
	tasks := []MCTask{
		{Context: "abc", Endings: []string{"e", "defgh", "x", "dq"}, Gold: 1},
		{Context: "abc", Endings: []string{"d", "z", "dex", "k"}, Gold: 0},
	}
	res, err := MultipleChoice(ctxSession{chain(p)}, letters, tasks)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{miss, 5 * hit, miss, hit + miss}, {hit, miss, 2*hit + miss, miss}}
	for i, it := range res.Items {
		for e, lp := range it.LogProb {
			if math.Abs(lp-want[i][e]) > 1e-9 {
				t.Errorf("task %d ending %d: log-prob %v, want %v", i, e, lp, want[i][e])
			}
		}
	}
	// task 1: sum picks "defgh" (5 hits beat 1 miss), and so does the mean
	// task 2: sum picks "d" (one hit); "dex" has 2 hits and a miss
	if res.Items[0].Pred != 1 || res.Items[0].PredNorm != 1 || res.Items[1].Pred != 0 || res.Items[1].PredNorm != 0 {
		t.Errorf("predictions %+v", res.Items)
	}
	if res.Acc != 1 || res.AccNorm != 1 {
		t.Errorf("acc %v acc_norm %v, want 1 and 1", res.Acc, res.AccNorm)
	}
	// a long ending with one miss against short all-miss endings: the sum
	// prefers a short one, the mean the long one.
	res, err = MultipleChoice(ctxSession{chain(p)}, letters, []MCTask{{Context: "abc", Endings: []string{"defgx", "z", "q", "dz"}, Gold: 0}})
	if err != nil {
		t.Fatal(err)
	}
	it := res.Items[0]
	// sums: 4 hits + a miss < one miss ("z", first of the tied "z" and "q")
	if wantSum := 4*hit + miss; math.Abs(it.LogProb[0]-wantSum) > 1e-9 || it.Pred != 1 {
		t.Errorf("long ending: %+v", it)
	}
	if it.PredNorm != 0 {
		t.Errorf("mean log-prob picked %d, want 0: %+v", it.PredNorm, it)
	}
}

// TestLambada checks accuracy and perplexity on two passages, one whose
// last word the chain model predicts and one it does not.
func TestLambada(t *testing.T) {
	const p, V = 0.7, 27
	items, err := ReadLambada(strings.NewReader(`{"text": "xy abc d"}` + "\n" + `{"text": "abc ex"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if items[0].Context != "xy abc" || items[0].Target != " d" {
		t.Fatalf("split %+v", items[0])
	}
	res, err := Lambada(ctxSession{chain(p)}, letters, items)
	if err != nil {
		t.Fatal(err)
	}
	hit := peakNLL(peakLogit(p, V), V)
	q := (1 - math.Exp(-hit)) / (V - 1)
	// "d" after c: a hit; "ex" after c: two misses (e after c, x after e)
	want := math.Exp((hit + 2*-math.Log(q)) / 2)
	if res.Acc != 0.5 || math.Abs(res.PPL-want)/want > 1e-9 {
		t.Errorf("acc %v ppl %v, want 0.5 and %v", res.Acc, res.PPL, want)
	}
}

// TestTaskFileErrors checks that malformed task files are refused with the
// place named.
func TestTaskFileErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a\n0\nb\nc\nd\n", "multiple of 6"},
		{"ctx\n7\na\nb\nc\nd\n", "task 1"},
		{"", "multiple of 6"},
	} {
		if _, err := ReadHellaSwag(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("hellaswag %q: %v, want %q", c.in, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{`{"text": "oneword"}`, "line 1"},
		{`{"txt": "a b"}`, "no \"text\""},
		{"{", "line 1"},
		{"\n", "no passages"},
	} {
		if _, err := ReadLambada(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("lambada %q: %v, want %q", c.in, err, c.want)
		}
	}
	long := chain(0.5)
	long.ctx = 3
	if _, err := MultipleChoice(ctxSession{long}, letters, []MCTask{{Context: "abc", Endings: []string{"d", "e"}}}); err == nil {
		t.Error("a task longer than the context was accepted")
	}
}

// TestLambadaPhases checks the phases against Lambada alone (accuracy,
// per-passage perplexity) and the KL and top-1 agreement over the target
// tokens against closed forms: the same model (0, 100%), the same peak
// with another probability, and the peak on another token (0%).
func TestLambadaPhases(t *testing.T) {
	const V = 27
	items, err := ReadLambada(strings.NewReader(`{"text": "xy abc d"}` + "\n" + `{"text": "abc ex"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := 0.7, 0.4
	skip := func(p float64) *peakSession {
		s := chain(p)
		s.next = func(x int) int { return (x + 2) % V }
		return s
	}
	mk := func() []Session {
		return []Session{ctxSession{chain(p1)}, ctxSession{chain(p1)}, ctxSession{chain(p2)}, ctxSession{skip(p1)}}
	}
	res, err := LambadaPhases(mk(), letters, items)
	if err != nil {
		t.Fatal(err)
	}
	for p, s := range mk() {
		alone, err := Lambada(s, letters, items)
		if err != nil {
			t.Fatal(err)
		}
		r := res[p]
		if r.Acc != alone.Acc || r.PPL != alone.PPL || r.Items != 2 || r.Tokens != 3 {
			t.Errorf("phase %d: %+v, alone %+v", p, r, alone)
		}
		// 2 passages, 3 target tokens ("d"; "e", "x")
		if want := math.Pow(alone.PPL, 2.0/3); math.Abs(r.TokenPPL-want)/want > 1e-12 {
			t.Errorf("phase %d: per-token ppl %v, want %v", p, r.TokenPPL, want)
		}
	}
	q := func(p float64) float64 {
		f := float64(float32(peakLogit(p, V)))
		return math.Exp(f) / (math.Exp(f) + V - 1)
	}
	a, b := q(p1), q(p2)
	same := a*math.Log(a/b) + (1-a)*math.Log((1-a)/(1-b))
	lo := (1 - a) / (V - 1)
	moved := a*math.Log(a/lo) + lo*math.Log(lo/a)
	for p, c := range []struct{ kl, top1 float64 }{{0, 1}, {0, 1}, {same, 1}, {moved, 0}} {
		if math.Abs(res[p].KL-c.kl) > 1e-9 || res[p].Top1 != c.top1 {
			t.Errorf("phase %d: KL %v top1 %v, want %v and %v", p, res[p].KL, res[p].Top1, c.kl, c.top1)
		}
	}
	if res[0].Acc != 0.5 || res[3].Acc != 0 {
		t.Errorf("accuracy %v and %v, want 0.5 and 0", res[0].Acc, res[3].Acc)
	}
	if _, err := LambadaPhases(nil, letters, items); err == nil {
		t.Error("no phases: no error")
	}
	bad := chain(p1)
	bad.err = errFake
	if _, err := LambadaPhases([]Session{ctxSession{chain(p1)}, ctxSession{bad}}, letters, items); err == nil || !strings.Contains(err.Error(), "phase 2") {
		t.Errorf("failing phase: %v", err)
	}
}
