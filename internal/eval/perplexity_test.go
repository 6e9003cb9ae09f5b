package eval

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// cycle returns n tokens following next from start.
func cycle(n, start int, next func(int) int) []int {
	t := make([]int, n)
	t[0] = start
	for i := 1; i < n; i++ {
		t[i] = next(t[i-1])
	}
	return t
}

func relErr(got, want float64) float64 { return math.Abs(got-want) / math.Abs(want) }

// TestUniformIsVocabSize: a model that spreads probability evenly over V
// ids has perplexity V under both methods, whatever is scored.
func TestUniformIsVocabSize(t *testing.T) {
	for _, V := range []int{2, 7, 512, 32000} {
		tokens := cycle(100, 0, func(x int) int { return (x*5 + 3) % V })
		for _, o := range []Options{{Ctx: 16, BOS: 1}, {Ctx: 16, Stride: 5, BOS: -1}, {Ctx: 9, Stride: 9}} {
			s := &peakSession{V: V}
			r, err := Perplexity(s, tokens, o)
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(r.PPL, float64(V)); e > 1e-12 {
				t.Errorf("V=%d %s: ppl %v, want %d (rel err %g > 1e-12)", V, r.Method, r.PPL, V, e)
			}
			if e := relErr(r.NLL, math.Log(float64(V))); e > 1e-12 {
				t.Errorf("V=%d %s: nll %v, want log V = %v", V, r.Method, r.NLL, math.Log(float64(V)))
			}
			if r.StdErr > 1e-9 {
				t.Errorf("V=%d %s: constant nll has stderr %g", V, r.Method, r.StdErr)
			}
		}
	}
}

// TestConstantProbability: a model that always gives probability p to the
// true next token has perplexity 1/p. The peak logit is stored in float32,
// so the bound is 1e-6 relative.
func TestConstantProbability(t *testing.T) {
	const V = 64
	next := func(x int) int { return (x*5 + 3) % V }
	tokens := cycle(300, 7, next)
	for _, p := range []float64{0.75, 0.5, 0.1, 0.999} {
		w := peakLogit(p, V)
		for _, o := range []Options{{Ctx: 32, BOS: 1}, {Ctx: 31, BOS: -1}, {Ctx: 32, Stride: 8}, {Ctx: 20, Stride: 20}} {
			s := &peakSession{V: V, next: next, w: func(int) float64 { return w }}
			r, err := Perplexity(s, tokens, o)
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(r.PPL, 1/p); e > 1e-6 {
				t.Errorf("p=%v %s ctx %d: ppl %v, want %v (rel err %g > 1e-6)", p, r.Method, o.Ctx, r.PPL, 1/p, e)
			}
		}
	}
}

// distinctSetup gives every token a different value 0..n-1 and the fake a
// different peak logit per input, so the mean NLL identifies which
// positions were scored.
func distinctSetup(n int) ([]int, *peakSession) {
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = i
	}
	s := &peakSession{V: n + 1, next: func(x int) int { return x + 1 }, w: func(x int) float64 { return 0.013 * float64(x%97) }}
	return tokens, s
}

// meanNLL is the expected mean NLL when the targets at positions pos are
// scored with distinctSetup.
func meanNLL(pos []int, V int) float64 {
	var sum float64
	for _, t := range pos {
		sum += peakNLL(0.013*float64((t-1)%97), V)
	}
	return sum / float64(len(pos))
}

// TestLlamaCppScoredPositions checks the chunking of llama.cpp's
// perplexity(): n_chunk = n_tokens / n_ctx, first = n_ctx/2, and in chunk c
// logits j in [first, n_ctx-1) score token c*n_ctx + j + 1, so
// count += n_ctx - first - 1 per chunk; each chunk is decoded from a
// cleared cache with its first token set to BOS.
func TestLlamaCppScoredPositions(t *testing.T) {
	const bos = 9999
	for _, tc := range []struct{ n, ctx, max, chunks int }{
		{256, 128, 0, 2}, {383, 128, 0, 2}, {384, 128, 0, 3}, {100, 7, 0, 14}, {100, 8, 0, 12},
		{100, 8, 5, 5}, {100, 8, 50, 12}, {6, 3, 0, 2},
	} {
		tokens, s := distinctSetup(tc.n)
		s.V = bos + 2
		var prog []int
		var last float64
		r, err := Perplexity(s, tokens, Options{Ctx: tc.ctx, MaxChunks: tc.max, BOS: bos,
			Progress: func(done, total int, ppl float64) {
				if total != tc.chunks {
					t.Errorf("progress total %d, want %d", total, tc.chunks)
				}
				prog = append(prog, done)
				last = ppl
			}})
		if err != nil {
			t.Fatal(err)
		}
		first := tc.ctx / 2
		if r.Chunks != tc.chunks || r.Tokens != tc.chunks*(tc.ctx-first-1) || r.Ctx != tc.ctx || r.Method != LlamaCpp {
			t.Errorf("n=%d ctx=%d: got %d chunks %d tokens ctx %d %s, want %d chunks %d tokens",
				tc.n, tc.ctx, r.Chunks, r.Tokens, r.Ctx, r.Method, tc.chunks, tc.chunks*(tc.ctx-first-1))
		}
		if len(s.calls) != tc.chunks || s.dirty {
			t.Errorf("n=%d ctx=%d: %d windows run (want %d), reset before each: %v", tc.n, tc.ctx, len(s.calls), tc.chunks, !s.dirty)
		}
		var pos []int
		for c, ids := range s.calls {
			want := append([]int{bos}, tokens[c*tc.ctx+1:(c+1)*tc.ctx]...)
			if !slices.Equal(ids, want) {
				t.Errorf("n=%d ctx=%d chunk %d: ran %v, want %v", tc.n, tc.ctx, c, ids, want)
			}
			for j := first; j < tc.ctx-1; j++ {
				pos = append(pos, c*tc.ctx+j+1)
			}
		}
		if e := relErr(r.NLL, meanNLL(pos, s.V)); e > 1e-12 {
			t.Errorf("n=%d ctx=%d: nll %v, want %v over positions %v", tc.n, tc.ctx, r.NLL, meanNLL(pos, s.V), pos)
		}
		if len(prog) != tc.chunks || prog[len(prog)-1] != tc.chunks || last != r.PPL {
			t.Errorf("progress calls %v (last ppl %v, result %v)", prog, last, r.PPL)
		}
	}
}

// hfSliding lists the target positions of the Hugging Face guide's loop:
// for begin in range(0, n, stride): end = min(begin+ctx, n);
// trg_len = end - prev_end; labels before end-trg_len are masked and the
// label shift drops position begin; prev_end = end; stop when end == n.
func hfSliding(n, ctx, stride, maxWindows int) (pos []int, windows int) {
	prevEnd := 0
	for begin := 0; begin < n; begin += stride {
		end := min(begin+ctx, n)
		trg := end - prevEnd
		for t := end - trg; t < end; t++ {
			if t > begin {
				pos = append(pos, t)
			}
		}
		prevEnd = end
		windows++
		if end == n || windows == maxWindows {
			break
		}
	}
	return pos, windows
}

// TestSlidingScoredPositions checks the sliding windows against the loop of
// the Hugging Face perplexity guide.
func TestSlidingScoredPositions(t *testing.T) {
	for _, tc := range []struct{ n, ctx, stride, max int }{
		{100, 16, 4, 0}, {100, 16, 16, 0}, {100, 16, 1, 0}, {10, 16, 4, 0}, {2, 2, 1, 0},
		{101, 20, 7, 0}, {100, 16, 4, 3}, {17, 16, 16, 0}, {16, 16, 3, 0},
	} {
		tokens, s := distinctSetup(tc.n)
		r, err := Perplexity(s, tokens, Options{Ctx: tc.ctx, Stride: tc.stride, MaxChunks: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		pos, windows := hfSliding(tc.n, tc.ctx, tc.stride, tc.max)
		if r.Method != Sliding || r.Chunks != windows || r.Tokens != len(pos) || len(s.calls) != windows || s.dirty {
			t.Errorf("%+v: %s %d windows %d tokens (%d runs), want %d windows %d tokens",
				tc, r.Method, r.Chunks, r.Tokens, len(s.calls), windows, len(pos))
		}
		if tc.stride < tc.ctx && tc.max == 0 && r.Tokens != tc.n-1 {
			t.Errorf("%+v: %d tokens scored, want every token but the first (%d)", tc, r.Tokens, tc.n-1)
		}
		for w, ids := range s.calls {
			b := w * tc.stride
			if !slices.Equal(ids, tokens[b:min(b+tc.ctx, tc.n)]) {
				t.Errorf("%+v window %d: ran %v", tc, w, ids)
			}
		}
		if e := relErr(r.NLL, meanNLL(pos, s.V)); e > 1e-12 {
			t.Errorf("%+v: nll %v, want %v", tc, r.NLL, meanNLL(pos, s.V))
		}
	}
}

// TestStdErr checks the "+/-" against a direct computation of llama.cpp's
// formula: sqrt((mean(v^2) - mean(v)^2) / (n-1)) * ppl.
func TestStdErr(t *testing.T) {
	tokens, s := distinctSetup(200)
	r, err := Perplexity(s, tokens, Options{Ctx: 20, BOS: -1})
	if err != nil {
		t.Fatal(err)
	}
	var vs []float64
	for c := range 10 {
		for j := 10; j < 19; j++ {
			vs = append(vs, peakNLL(0.013*float64((c*20+j)%97), s.V))
		}
	}
	var m, m2 float64
	for _, v := range vs {
		m += v / float64(len(vs))
		m2 += v * v / float64(len(vs))
	}
	want := math.Sqrt((m2-m*m)/float64(len(vs)-1)) * math.Exp(m)
	if r.Tokens != len(vs) || relErr(r.StdErr, want) > 1e-6 {
		t.Errorf("stderr %v over %d tokens, want %v over %d", r.StdErr, r.Tokens, want, len(vs))
	}
}

func TestErrors(t *testing.T) {
	tokens := cycle(300, 0, func(x int) int { return (x + 1) % 50 })
	uni := func() *peakSession { return &peakSession{V: 50} }
	for _, tc := range []struct {
		name string
		s    Session
		toks []int
		o    Options
		want string
	}{
		{"ctx over model", ctxSession{&peakSession{V: 50, ctx: 64}}, tokens, Options{Ctx: 128}, "ctx 128 exceeds the model's context 64"},
		{"tiny ctx", uni(), tokens, Options{Ctx: 2}, "ctx 2 is too small"},
		{"negative ctx", uni(), tokens, Options{Ctx: -5, Stride: 1}, "ctx -5 is too small"},
		{"stride over ctx", uni(), tokens, Options{Ctx: 16, Stride: 17}, "stride 17 must be between 1 and ctx 16"},
		{"stride zero sliding", uni(), tokens, Options{Ctx: 16, Method: Sliding}, "stride 0 must be between"},
		{"stride with llama.cpp", uni(), tokens, Options{Ctx: 16, Stride: 4, Method: LlamaCpp}, "applies to the sliding method only"},
		{"negative chunks", uni(), tokens, Options{Ctx: 16, MaxChunks: -1}, "max chunks -1"},
		{"unknown method", uni(), tokens, Options{Ctx: 16, Method: "bogus"}, `unknown method "bogus"`},
		{"model fails", &peakSession{V: 50, err: errFake}, tokens, Options{Ctx: 16}, "chunk 1: fake model failure"},
		{"token out of vocab", &peakSession{V: 10}, tokens, Options{Ctx: 16}, "token id 10 is outside the model's 10 logits"},
		{"bad rows", &shortSession{}, tokens, Options{Ctx: 16, Stride: 4}, "window 1: the model returned 15 rows of logits for 16 tokens"},
		{"nan logits", &nanSession{V: 50}, tokens, Options{Ctx: 16}, "no finite log-probability"},
		{"sliding one token", uni(), tokens[:1], Options{Ctx: 16, Stride: 4}, "only 1 tokens; the sliding method needs at least 2"},
		{"huge ctx", uni(), tokens, Options{Ctx: math.MaxInt}, "needs at least"},
		{"huge ctx sliding", uni(), tokens, Options{Ctx: math.MaxInt, Stride: math.MaxInt}, ""},
	} {
		_, err := Perplexity(tc.s, tc.toks, tc.o)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", tc.name, err, tc.want)
		}
		if strings.HasPrefix(tc.name, "ctx") || strings.Contains(tc.name, "stride") || strings.Contains(tc.name, "method") {
			if !errors.Is(err, ErrBadOptions) {
				t.Errorf("%s: %v does not wrap ErrBadOptions", tc.name, err)
			}
		}
	}
}

// TestTooShort checks the llama.cpp rule "you need at least 2*n_ctx tokens".
func TestTooShort(t *testing.T) {
	s := &peakSession{V: 50}
	tokens := cycle(255, 0, func(x int) int { return (x + 1) % 50 })
	_, err := Perplexity(s, tokens, Options{Ctx: 128})
	var ts *TooShortError
	if !errors.As(err, &ts) || ts.Tokens != 255 || ts.Need != 256 || ts.Ctx != 128 {
		t.Fatalf("255 tokens at ctx 128: error %#v, want TooShortError{255, 256, 128}", err)
	}
	if !strings.Contains(err.Error(), "at least 256") {
		t.Errorf("message %q does not say how many tokens are needed", err)
	}
	if _, err := Perplexity(s, append(tokens, 0), Options{Ctx: 128}); err != nil {
		t.Errorf("256 tokens at ctx 128: %v", err)
	}
}

type shortSession struct{}

func (shortSession) Reset() {}
func (shortSession) Logits(ids []int) ([][]float32, error) {
	return make([][]float32, len(ids)-1), nil
}

type nanSession struct{ V int }

func (nanSession) Reset() {}
func (s nanSession) Logits(ids []int) ([][]float32, error) {
	rows := make([][]float32, len(ids))
	for i := range rows {
		rows[i] = make([]float32, s.V)
		rows[i][3] = float32(math.NaN())
	}
	return rows, nil
}
