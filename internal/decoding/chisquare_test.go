package decoding_test

import (
	"context"
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/testutil"
)

// flatDraft is a draft sequence whose logits are halved (a flatter
// distribution than the model's), so that its drafts follow another law
// than the target's and the rejection rule has work to do. Close keeps
// the session for the next sample.
type flatDraft struct {
	*engine.Session
	buf []float32
}

func (d *flatDraft) flat(l []float32) []float32 {
	d.buf = append(d.buf[:0], l...)
	for i := range d.buf {
		d.buf[i] *= 0.5
	}
	return d.buf
}

func (d *flatDraft) PrefillContext(ctx context.Context, ids []int) ([]float32, error) {
	l, err := d.Session.PrefillContext(ctx, ids)
	if err != nil {
		return nil, err
	}
	return d.flat(l), nil
}

func (d *flatDraft) Decode(id int) ([]float32, error) {
	l, err := d.Session.Decode(id)
	if err != nil {
		return nil, err
	}
	return d.flat(l), nil
}

func (d *flatDraft) Close() {}

func softmax(l []float32) []float64 {
	mx := l[sample.Argmax(l)]
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

// TestDraftSamplingDistribution: with sampling (temperature 1, no
// filters) after a prompt of only BOS, draft-model speculation draws the second generated token (the
// first one a draft proposes) with the target's own law: over 3000 fixed
// seeds its counts pass Pearson's chi-square goodness-of-fit test against
// the exact marginal, computed from the model by summing over the first
// token, at significance level 0.001. The draft is the model with halved
// logits; the same test rejects the draft's own marginal (the law of
// always accepting), so it has the power to see a wrong rule, and both
// acceptances and rejections happen. Fixed seeds make it deterministic.
func TestDraftSamplingDistribution(t *testing.T) {
	const samples = 3000
	m := storiesModel(t)
	e := compileKV(t, m, "f32", 16, 64)
	prompt := []int{1} // BOS: the first tokens of a story spread widely
	vocab := m.Config.Vocab

	// the exact marginals of the second token, target's and draft's
	s := newSession(t, e, engine.ModeHybrid)
	l, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	first := softmax(l)
	exact, exactQ := make([]float64, vocab), make([]float64, vocab)
	for t1, p1 := range first {
		l, err := s.Decode(t1)
		if err != nil {
			t.Fatal(err)
		}
		p2, q2 := softmax(l), softmax((&flatDraft{}).flat(l))
		for y := range p2 {
			exact[y] += p1 * p2[y]
		}
		for y := range q2 {
			exactQ[y] += p1 * q2[y]
		}
		if err := s.Rewind(len(prompt)); err != nil {
			t.Fatal(err)
		}
	}

	// speculative sampling, seed by seed, on one target and one draft
	// session rewound each time
	target := newSession(t, e, engine.ModeHybrid)
	pre, err := target.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	pre = append([]float32(nil), pre...)
	draft := &flatDraft{Session: newSession(t, e, engine.ModeHybrid)}
	st := &decoding.Draft{DraftMax: 4, Adaptive: decoding.Adaptive{Off: true},
		NewSequence: func() (decoding.DraftSequence, error) { return draft, nil }}
	counts := make([]float64, vocab)
	var stats decoding.Stats
	for seed := range uint64(samples) {
		if err := target.Rewind(len(prompt)); err != nil {
			t.Fatal(err)
		}
		smp := sample.New(sample.Params{Temperature: 1, Seed: seed})
		dec, err := st.Start(target, prompt, smp)
		if err != nil {
			t.Fatal(err)
		}
		t1 := smp.Sample(pre, nil)
		next, err := dec.Next(t1, []int{t1})
		if err != nil {
			t.Fatal(err)
		}
		counts[next[0]]++
		ds := dec.Stats()
		stats.Drafted += ds.Drafted
		stats.Accepted += ds.Accepted
	}
	if stats.Accepted == 0 || stats.Accepted == stats.Drafted {
		t.Fatalf("%d of %d drafts accepted: the test needs both acceptances and rejections", stats.Accepted, stats.Drafted)
	}
	expected, expectedQ := make([]float64, vocab), make([]float64, vocab)
	for i := range exact {
		expected[i], expectedQ[i] = exact[i]*samples, exactQ[i]*samples
	}
	stat, df := testutil.ChiSquare(counts, expected)
	crit := testutil.ChiSquareCritical(df)
	t.Logf("chi-square %.1f, %d degrees of freedom, critical value %.1f at 0.001; %d/%d drafts accepted", stat, df, crit, stats.Accepted, stats.Drafted)
	if stat > crit {
		t.Errorf("speculative samples: chi-square %.1f > %.1f (df %d): not the target's distribution", stat, crit, df)
	}
	if wrong, df := testutil.ChiSquare(expectedQ, expected); wrong <= testutil.ChiSquareCritical(df) {
		t.Errorf("the draft's own law gives chi-square %.1f <= %.1f: the test could not tell a wrong rule", wrong, testutil.ChiSquareCritical(df))
	}
}
