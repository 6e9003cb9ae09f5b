package bench

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeSession costs fixed fake time per call, advancing its own clock, and
// counts what it is asked to do. Its logits after position p peak at token
// (7p+3) mod vocab, so the decode feed (the argmax) is checkable.
type fakeSession struct {
	now          time.Time
	prefillBase  time.Duration // per Prefill call
	prefillTok   time.Duration // per prompt token
	decodeTok    time.Duration // per Decode call
	slowdown     time.Duration // added to prefillTok after every Reset
	ctx, vocab   int
	pos          int
	resets       int
	prefills     int
	prefillToks  int
	decodes      int
	prefillAt    []int // position at each Prefill call
	badFeeds     int   // Decode ids that were not the previous argmax
	outOfRange   int   // ids outside [0, vocab)
	last         int   // argmax of the last logits returned
	failDecodeAt int   // Decode call number that fails (0: never)
}

func (f *fakeSession) logits() []float32 {
	l := make([]float32, f.vocab)
	f.last = (7*f.pos + 3) % f.vocab
	l[f.last] = 1
	return l
}

func (f *fakeSession) Prefill(ids []int) ([]float32, error) {
	f.prefills++
	f.prefillToks += len(ids)
	f.prefillAt = append(f.prefillAt, f.pos)
	for _, id := range ids {
		if id < 0 || id >= f.vocab {
			f.outOfRange++
		}
	}
	f.now = f.now.Add(f.prefillBase + time.Duration(len(ids))*f.prefillTok)
	f.pos += len(ids)
	return f.logits(), nil
}

func (f *fakeSession) Decode(id int) ([]float32, error) {
	f.decodes++
	if f.failDecodeAt == f.decodes {
		return nil, errors.New("context is full")
	}
	if id != f.last {
		f.badFeeds++
	}
	f.now = f.now.Add(f.decodeTok)
	f.pos++
	return f.logits(), nil
}

func (f *fakeSession) Reset() {
	f.pos = 0
	f.resets++
	f.prefillTok += f.slowdown
}

func (f *fakeSession) Context() int { return f.ctx }

func (f *fakeSession) clock() time.Time { return f.now }

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestRunCountsAndRates checks token counts, call counts and the rates
// derived from the fake's cost model: a prefill of P tokens costs
// base + P*tok, a decode step dec.
func TestRunCountsAndRates(t *testing.T) {
	const (
		base = 2 * time.Millisecond
		tok  = time.Millisecond
		dec  = 3 * time.Millisecond
		reps = 3
	)
	f := &fakeSession{prefillBase: base, prefillTok: tok, decodeTok: dec, ctx: 64, vocab: 50}
	tests := []Test{{Prompt: 8}, {Gen: 5}, {Prompt: 6, Gen: 4}}
	res, err := Run(f, tests, Options{Repetitions: reps, Vocab: 50, Seed: 1, Clock: f.clock,
		PeakRSS: func() int64 { return 3 << 20 }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].Name != "pp8" || res[1].Name != "tg5" || res[2].Name != "pg6,4" {
		t.Fatalf("results %+v", res)
	}
	// calls: 3 pp prefills, 3 untimed 1-token tg prompts, 3 pg prefills
	if f.prefills != 9 || f.prefillToks != reps*(8+1+6) || f.decodes != reps*(5+4) || f.resets != 9 {
		t.Errorf("prefills %d (%d tokens), decodes %d, resets %d", f.prefills, f.prefillToks, f.decodes, f.resets)
	}
	for i, p := range f.prefillAt {
		if p != 0 {
			t.Errorf("prefill %d started at position %d, not from an empty sequence", i, p)
		}
	}
	if f.badFeeds != 0 || f.outOfRange != 0 {
		t.Errorf("%d decode feeds were not the argmax, %d ids out of range", f.badFeeds, f.outOfRange)
	}
	secs := func(d time.Duration) float64 { return d.Seconds() }
	pp := base + 8*tok
	tg := 5 * dec
	pgPrefill, pgDecode := base+6*tok, 4*dec
	want := []struct{ tokS, ms, decodeTokS, ttft float64 }{
		{8 / secs(pp), ms(pp), 0, ms(pp)},
		{5 / secs(tg), ms(tg), 0, 0},
		{10 / secs(pgPrefill+pgDecode), ms(pgPrefill + pgDecode), 4 / secs(pgDecode), 0},
	}
	for i, w := range want {
		r := res[i]
		if !near(r.TokS, w.tokS) || !near(r.Ms, w.ms) || !near(r.DecodeTokS, w.decodeTokS) || !near(r.TTFTMs, w.ttft) {
			t.Errorf("%s: tok/s %v ms %v decode %v ttft %v, want %+v", r.Name, r.TokS, r.Ms, r.DecodeTokS, r.TTFTMs, w)
		}
		if r.Stddev != 0 || len(r.Samples) != reps || r.RSSMB != 3 {
			t.Errorf("%s: stddev %v, %d samples, rss %v MiB", r.Name, r.Stddev, len(r.Samples), r.RSSMB)
		}
	}
}

// TestRunStddev makes every repetition slower than the last and checks the
// mean and sample standard deviation of the per-repetition rates.
func TestRunStddev(t *testing.T) {
	f := &fakeSession{prefillTok: 0, slowdown: time.Millisecond, ctx: 16, vocab: 8}
	res, err := Run(f, []Test{{Prompt: 10}}, Options{Repetitions: 3, Vocab: 8, Clock: f.clock, PeakRSS: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	// repetition i costs 10*(i+1) ms: 1000, 500 and 333.3 tok/s
	rates := []float64{1000, 500, 1000.0 / 3}
	mean := (rates[0] + rates[1] + rates[2]) / 3
	var ss float64
	for _, r := range rates {
		ss += (r - mean) * (r - mean)
	}
	if r := res[0]; !near(r.TokS, mean) || !near(r.Stddev, math.Sqrt(ss/2)) || !near(r.Ms, 20) {
		t.Errorf("tok/s %v ± %v, %v ms; want %v ± %v, 20 ms", r.TokS, r.Stddev, r.Ms, mean, math.Sqrt(ss/2))
	}
}

func TestRunWarmup(t *testing.T) {
	f := &fakeSession{ctx: 32, vocab: 8}
	if _, err := Run(f, []Test{{Prompt: 4, Gen: 2}}, Options{Vocab: 8, Warmup: true, Clock: f.clock}); err != nil {
		t.Fatal(err)
	}
	// warm-up: a 4-token prefill and 1 decode; then 1 repetition of 4 + 2
	if f.prefills != 2 || f.prefillToks != 8 || f.decodes != 3 || f.resets != 3 {
		t.Errorf("prefills %d (%d tokens), decodes %d, resets %d", f.prefills, f.prefillToks, f.decodes, f.resets)
	}
}

// TestRunContext checks that a test needing more positions than the
// context is refused before anything runs, naming the context.
func TestRunContext(t *testing.T) {
	for _, c := range []struct {
		test Test
		need int
	}{{Test{Prompt: 17}, 17}, {Test{Gen: 16}, 17}, {Test{Prompt: 10, Gen: 7}, 17}} {
		f := &fakeSession{ctx: 16, vocab: 8}
		_, err := Run(f, []Test{{Prompt: 4}, c.test}, Options{Vocab: 8, Clock: f.clock})
		var ce *ContextError
		if !errors.As(err, &ce) || ce.Context != 16 || ce.Positions != c.need || !strings.Contains(err.Error(), "context is 16") {
			t.Errorf("%s: %v", c.test.Name(), err)
		}
		if f.prefills+f.decodes != 0 {
			t.Errorf("%s: ran %d calls before refusing", c.test.Name(), f.prefills+f.decodes)
		}
	}
	// exactly the context fits
	f := &fakeSession{ctx: 16, vocab: 8}
	if _, err := Run(f, []Test{{Prompt: 16}, {Gen: 15}, {Prompt: 10, Gen: 6}}, Options{Vocab: 8, Clock: f.clock}); err != nil {
		t.Errorf("tests filling the context: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	f := &fakeSession{ctx: 16, vocab: 8, failDecodeAt: 2}
	_, err := Run(f, []Test{{Gen: 4}}, Options{Vocab: 8, Clock: f.clock})
	if err == nil || !strings.Contains(err.Error(), "tg4") || !strings.Contains(err.Error(), "context is full") {
		t.Errorf("decode failure: %v", err)
	}
	if _, err := Run(f, []Test{{Gen: 4}}, Options{Clock: f.clock}); err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("no vocabulary: %v", err)
	}
	if _, err := Run(f, []Test{{}}, Options{Vocab: 8, Clock: f.clock}); err == nil {
		t.Error("an empty test was accepted")
	}
}

func TestTests(t *testing.T) {
	ts, err := Tests([]int{128, 0, 512}, []int{0, 64}, [][2]int{{512, 128}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ts {
		names = append(names, x.Name())
	}
	if got := strings.Join(names, " "); got != "pp128 pp512 tg64 pg512,128" {
		t.Errorf("names %q", got)
	}
	for _, bad := range []struct {
		p, n []int
		pg   [][2]int
		want string
	}{
		{[]int{-1}, nil, nil, "negative"},
		{nil, []int{-2}, nil, "negative"},
		{nil, nil, [][2]int{{0, 4}}, "at least 1"},
		{[]int{0}, []int{0}, nil, "no tests"},
	} {
		if _, err := Tests(bad.p, bad.n, bad.pg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %v %v: %v, want %q", bad.p, bad.n, bad.pg, err, bad.want)
		}
	}
}

func TestMeanStddev(t *testing.T) {
	// the textbook set: mean 5, population variance 4, sample variance 32/7
	m, s := MeanStddev([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if m != 5 || !near(s, math.Sqrt(32.0/7)) {
		t.Errorf("mean %v stddev %v", m, s)
	}
	if m, s := MeanStddev([]float64{3}); m != 3 || s != 0 {
		t.Errorf("one value: %v %v", m, s)
	}
	if m, s := MeanStddev(nil); m != 0 || s != 0 {
		t.Errorf("no values: %v %v", m, s)
	}
}

func TestArgmax(t *testing.T) {
	for _, c := range []struct {
		xs   []float32
		want int
	}{{nil, 0}, {[]float32{1}, 0}, {[]float32{1, 3, 3, 2}, 1}, {[]float32{-5, -1, -9}, 1}} {
		if got := Argmax(c.xs); got != c.want {
			t.Errorf("Argmax(%v) = %d, want %d", c.xs, got, c.want)
		}
	}
}

func TestReportTable(t *testing.T) {
	r := Report{Architecture: "llama", Weights: "f32", SizeBytes: 3 << 20, Params: 1_240_000_000, Threads: 4,
		Mode: "hybrid", LoadMs: 12.5, RSSMB: 40, Kernels: "avx2+avx512vnni",
		Tests: []Result{{Name: "pp128", Prompt: 128, TokS: 100, Stddev: 1.5, TTFTMs: 9},
			{Name: "pp512", Prompt: 512, TokS: 90, TTFTMs: 30}, {Name: "tg128", Gen: 128, TokS: 20}}}
	r.SetTTFT()
	if r.TTFTTest != "pp512" || r.TTFTMs != 30 {
		t.Errorf("TTFT from %q: %v", r.TTFTTest, r.TTFTMs)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"100.00 ± 1.50", "3.00 MiB", "1.24 B", "tg128", "load 12.50 ms", "(pp512) 30.00 ms", "40.0 MiB", "kernels avx2+avx512vnni"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRunDepth: at a depth every repetition prefills the depth untimed
// after its reset, then times the test over it: a pp test's prefill
// starts at the depth and only its own tokens count, a tg test decodes
// after the depth without a 1-token prompt; names and the context check
// include the depth.
func TestRunDepth(t *testing.T) {
	f := &fakeSession{ctx: 64, vocab: 8, prefillTok: time.Millisecond, decodeTok: 2 * time.Millisecond}
	tests, err := AtDepth([]Test{{Prompt: 8}, {Gen: 4}}, 40)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(f, tests, Options{Vocab: 8, Repetitions: 2, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Name != "pp8 @ d40" || res[1].Name != "tg4 @ d40" || res[0].Depth != 40 {
		t.Errorf("names %q %q, depth %d", res[0].Name, res[1].Name, res[0].Depth)
	}
	// pp: 8 tokens in 8 ms; tg: 4 steps in 8 ms
	if res[0].TokS != 1000 || res[1].TokS != 500 {
		t.Errorf("rates %g and %g tok/s, want 1000 and 500", res[0].TokS, res[1].TokS)
	}
	// per repetition: the depth at 0, then (pp) the prompt at 40
	want := []int{0, 40, 0, 40, 0, 0}
	if !slices.Equal(f.prefillAt, want) {
		t.Errorf("prefills at %v, want %v", f.prefillAt, want)
	}
	if f.decodes != 8 {
		t.Errorf("%d decodes, want 8", f.decodes)
	}
	tooDeep, _ := AtDepth([]Test{{Gen: 30}}, 40)
	var ce *ContextError
	if _, err := Run(f, tooDeep, Options{Vocab: 8, Clock: f.clock}); !errors.As(err, &ce) || ce.Positions != 70 {
		t.Errorf("a test past the context at its depth: %v", err)
	}
	if _, err := AtDepth(tests, -1); err == nil {
		t.Error("a negative depth was accepted")
	}
}
