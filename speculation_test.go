package aotlm_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/testutil"
)

// specPrompts repeat themselves, so that prompt lookup finds drafts that
// the model accepts.
var specPrompts = []string{
	"Tom had a red ball. Tom had a red ball. Tom had",
	"Lily went to the park. She saw a dog. Lily went to the park. She saw",
	"The cat sat on the mat. The cat",
}

// TestSpeculationSharesDecodePasses: sessions generating at the same time
// with a strategy (prompt lookup, a draft model) give the ids they give
// with plain greedy decoding alone, while their verify chains and plain
// rows share passes: the model's passes are fewer than the passes the
// requests report together, some of them held verify chains of several
// rows, and the guesses were accepted.
func TestSpeculationSharesDecodePasses(t *testing.T) {
	defer aotlm.SetGatherTime(time.Minute)() // every pass waits for all the sessions
	const maxTokens = 40
	m := stories(t, "hybrid")
	off := aotlm.Adapt{Off: true}
	lookup, err := aotlm.PromptLookup(aotlm.LookupOptions{DraftMax: 4, Adapt: off})
	if err != nil {
		t.Fatal(err)
	}
	draft, err := m.DraftStrategy(m, aotlm.DraftOptions{DraftMax: 3, Adapt: off})
	if err != nil {
		t.Fatal(err)
	}
	var want [][]int
	for _, p := range specPrompts {
		want = append(want, generateIDs(t, m, aotlm.Request{Prompt: p, MaxTokens: maxTokens, IgnoreEOS: true}))
	}
	// the first two prompts with a strategy each, the third plain
	for _, st := range []*aotlm.Strategy{lookup, draft} {
		before := m.DecodeStats()
		reqs := make([]aotlm.Request, len(specPrompts))
		for i, p := range specPrompts {
			reqs[i] = aotlm.Request{Prompt: p, MaxTokens: maxTokens, IgnoreEOS: true}
			if i < 2 {
				reqs[i].Strategy = st
			}
		}
		got := generateAll(t, m, reqs)
		passes := 0
		for i, r := range got {
			if !slices.Equal(r.IDs, want[i]) {
				t.Errorf("%s: prompt %d: %v beside the others, plain alone %v", st.Name(), i, r.IDs, want[i])
			}
			if i < 2 {
				if r.Decoding == nil || r.Decoding.Verify == 0 || r.Decoding.Accepted == 0 {
					t.Fatalf("%s: prompt %d: report %+v, want verify passes with accepted guesses", st.Name(), i, r.Decoding)
				}
				passes += r.Decoding.Passes
				continue
			}
			passes += maxTokens - 1
		}
		s := m.DecodeStats()
		shared, verify, vrows := s.Passes-before.Passes, s.Verify-before.Verify, s.VerifyRows-before.VerifyRows
		t.Logf("%s: %d shared passes for %d request passes; %d held verify chains, %d rows of them", st.Name(), shared, passes, verify, vrows)
		if shared >= int64(passes) || verify == 0 || vrows <= verify {
			t.Errorf("%s: %d model passes for %d request passes, %d verify passes of %d rows: the chains did not share passes", st.Name(), shared, passes, verify, vrows)
		}
	}
}

// generateIDs generates req alone on a new session of m.
func generateIDs(t *testing.T, m *aotlm.Model, req aotlm.Request) []int {
	t.Helper()
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.IDs
}

// generateAll runs the requests at the same time, each on its own session;
// every generation waits after its first token until all have one.
func generateAll(t *testing.T, m *aotlm.Model, reqs []aotlm.Request) []*aotlm.Result {
	t.Helper()
	var first, done sync.WaitGroup
	first.Add(len(reqs))
	res := make([]*aotlm.Result, len(reqs))
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		done.Add(1)
		go func() {
			defer done.Done()
			n := 0
			res[i], errs[i] = s.Generate(context.Background(), req, func(aotlm.Token) error {
				if n++; n == 1 {
					first.Done()
					first.Wait()
				}
				return nil
			})
		}()
	}
	done.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("generation %d: %v", i, err)
		}
	}
	return res
}

// TestSpeculationSharedSamplingDistribution: with sampling (temperature
// 1) after a prompt of only BOS, prompt lookup over a corpus that follows
// every token with one fixed token (the likeliest second token) drafts it after the first
// generated one, and the verify chain runs in passes shared by two
// sessions; the second generated token keeps the model's own law: over
// 3000 fixed seeds its counts pass Pearson's chi-square test against the
// exact marginal (summed over the first token) at level 0.001, while the
// law of always accepting the draft fails it. Guesses are both accepted
// and rejected, and some passes held both sessions' chains.
func TestSpeculationSharedSamplingDistribution(t *testing.T) {
	const samples = 3000
	m := stories(t, "hybrid")
	vocab := m.Info().Vocab
	bos := []int{m.BOS()}
	// the exact marginal of the second token
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exact := make([]float64, vocab)
	rows, err := s.Logits(context.Background(), bos)
	if err != nil {
		t.Fatal(err)
	}
	p1 := softmax64(rows[0])
	for t1, p := range p1 {
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Logits(context.Background(), append(slices.Clone(bos), t1))
		if err != nil {
			t.Fatal(err)
		}
		for y, q := range softmax64(rows[1]) {
			exact[y] += p * q
		}
	}

	// the draft: the likeliest second token
	fixed := 0
	for y, p := range exact {
		if p > exact[fixed] {
			fixed = y
		}
	}
	corpus := make([]int, 0, 2*vocab)
	for id := range vocab {
		corpus = append(corpus, id, fixed)
	}
	lookup, err := aotlm.PromptLookup(aotlm.LookupOptions{NgramMax: 1, DraftMax: 1, Corpus: corpus, Adapt: aotlm.Adapt{Off: true}})
	if err != nil {
		t.Fatal(err)
	}

	before := m.DecodeStats()
	counts := make([]float64, vocab)
	var mu sync.Mutex
	var drafted, accepted, verify int
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.NewSession(0)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			for seed := w; seed < samples; seed += 2 {
				r, err := s.Generate(context.Background(), aotlm.Request{IDs: bos, MaxTokens: 2, IgnoreEOS: true, Strategy: lookup,
					Sampling: aotlm.Sampling{Temperature: 1, Seed: uint64(seed + 1)}}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				counts[r.IDs[1]]++
				drafted, accepted, verify = drafted+r.Decoding.Drafted, accepted+r.Decoding.Accepted, verify+r.Decoding.Verify
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if accepted == 0 || accepted == drafted {
		t.Fatalf("%d of %d drafts accepted: the test needs both acceptances and rejections", accepted, drafted)
	}
	st := m.DecodeStats()
	if passes := st.Verify - before.Verify; passes >= int64(verify) {
		t.Errorf("%d verify chains ran in %d passes: none shared a pass", verify, passes)
	}
	expected, always := make([]float64, vocab), make([]float64, vocab)
	for i := range exact {
		expected[i] = exact[i] * samples
	}
	// always accepting: the second token is the draft
	always[fixed] = samples
	stat, df := testutil.ChiSquare(counts, expected)
	crit := testutil.ChiSquareCritical(df)
	t.Logf("chi-square %.1f, %d degrees of freedom, critical value %.1f at 0.001; %d/%d drafts accepted; %d verify chains in %d passes",
		stat, df, crit, accepted, drafted, verify, st.Verify-before.Verify)
	if stat > crit {
		t.Errorf("speculative samples in shared passes: chi-square %.1f > %.1f (df %d): not the model's distribution", stat, crit, df)
	}
	if wrong, df := testutil.ChiSquare(always, expected); wrong <= testutil.ChiSquareCritical(df) {
		t.Errorf("always accepting gives chi-square %.1f <= %.1f: the test could not tell a wrong rule", wrong, testutil.ChiSquareCritical(df))
	}
}

func softmax64(l []float32) []float64 {
	mx := slices.Max(l)
	p := make([]float64, len(l))
	var sum float64
	for i, v := range l {
		p[i] = math.Exp(float64(v - mx))
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}
