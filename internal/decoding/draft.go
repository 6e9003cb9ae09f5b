package decoding

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
)

// DraftSequence is the draft model's sequence: it feeds tokens one chain
// at a time and rewinds. The runtime's sequences implement it.
type DraftSequence interface {
	PrefillContext(ctx context.Context, ids []int) ([]float32, error)
	Decode(id int) ([]float32, error)
	Rewind(pos int) error
	Pos() int
	Context() int
	Close()
}

// Draft is draft-model speculation: a small model drafts up to DraftMax
// tokens one by one, the target verifies them in one pass, and both
// rewind what was rejected. Greedy output is exactly the target's; with
// sampling, a draft d is kept with probability min(1, p(d)/q(d)) (p the
// target's distribution, q the draft's, both after the sampler's
// temperature and filters) and a rejection draws from the normalized
// max(0, p-q), which keeps the target's distribution.
type Draft struct {
	// NewSequence makes the draft model's sequence.
	NewSequence func() (DraftSequence, error)
	// DraftMax is the most tokens drafted per pass (default 8, at most
	// the target's largest pass minus one); DraftMin the fewest worth a
	// verify pass (default 1): fewer are decoded plainly. As with
	// Lookup, drafts start at 2 tokens and grow toward DraftMax while
	// they are kept (nextDraft).
	DraftMax, DraftMin int
	// PMin stops drafting at a token the draft gives less probability
	// than this (0: never).
	PMin     float64
	Adaptive Adaptive
}

// Name returns "draft".
func (d *Draft) Name() string { return "draft" }

// Start makes a draft decoder over t: it prefills the draft model with
// history (the prompt), so that the first round drafts at once.
func (d *Draft) Start(t Target, history []int, smp *sample.Sampler) (Decoder, error) {
	if d.NewSequence == nil {
		return nil, errors.New("draft: no draft model")
	}
	if d.DraftMax < 0 || d.DraftMin < 0 || d.PMin < 0 || d.PMin > 1 {
		return nil, fmt.Errorf("draft: sizes %d, %d must be >= 0 and p-min %v in [0, 1]", d.DraftMax, d.DraftMin, d.PMin)
	}
	seq, err := d.NewSequence()
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	dd := &draftDecoder{t: t, smp: smp, seq: seq, hist: append([]int(nil), history...),
		kmax: min(def(d.DraftMax, 8), t.MaxRows()-1), kmin: max(def(d.DraftMin, 1), 1), pmin: d.PMin,
		ctl: newControl(d.Adaptive, memoryKey(d, t)), st: Stats{Strategy: d.Name()}}
	dd.ctl.watch(t)
	dd.k = min(dd.kmax, firstDraft)
	dd.st.Note = dd.ctl.resumeNote()
	if dd.kmax < 1 {
		dd.st.Note = "the model's largest pass holds one row: plain decoding"
	}
	if seq.Pos() != 0 {
		if err := seq.Rewind(0); err != nil {
			seq.Close()
			return nil, fmt.Errorf("draft model: %w", err)
		}
	}
	if len(history) >= seq.Context() {
		dd.st.Note, dd.kmax = "the prompt does not fit the draft model's context: plain decoding", 0
	} else if len(history) > 0 {
		// the draft reads the prompt now, as the target did: a cost of
		// the first token's latency, not of the first guessing round
		if _, err := seq.PrefillContext(context.Background(), history); err != nil {
			seq.Close()
			return nil, fmt.Errorf("draft model: prompt: %w", err)
		}
	}
	return dd, nil
}

type draftDecoder struct {
	t          Target
	smp        *sample.Sampler
	seq        DraftSequence
	hist       []int // the target's committed ids; seq holds a prefix of them
	kmax, kmin int
	k          int // the current draft length (see nextDraft)
	pmin       float64
	q          [][]float32 // the draft's distributions, when sampling
	p          []float32
	ctl        control
	st         Stats
}

func (d *draftDecoder) Stats() Stats { return d.st }
func (d *draftDecoder) Close() {
	d.ctl.close()
	d.seq.Close()
}

func (d *draftDecoder) Next(id int, generated []int) ([]int, error) {
	start := time.Now()
	var drafts []int
	room := min(d.t.Context()-d.t.Pos()-1, d.seq.Context()-len(d.hist)-1)
	tried := !d.ctl.plainNext() && d.kmax >= 1 && room >= 1
	if tried {
		var err error
		var catchUp time.Duration
		if drafts, catchUp, err = d.draft(id, min(max(d.k, d.kmin), room), generated); err != nil {
			d.st.Note, d.kmax = fmt.Sprintf("the draft model failed (%v): plain decoding", err), 0
			drafts = nil
		}
		// the adaptive control judges what a round costs from now on:
		// the draft's catching up with tokens decoded plainly (its prompt,
		// a fallback's stretch) is paid once, not per round
		start = start.Add(catchUp)
	}
	if len(drafts) < d.kmin {
		out, err := plainStep(d.t, d.smp, id, generated, &d.st)
		if err != nil {
			return nil, err
		}
		d.hist = append(d.hist, id)
		if tried {
			d.ctl.missDone(time.Since(start), &d.st)
		} else {
			d.ctl.plainDone(time.Since(start), &d.st)
		}
		return out, nil
	}
	var out []int
	var err error
	if d.smp.Greedy() {
		out, err = verifyChain(d.t, d.smp, id, drafts, generated, &d.st)
	} else {
		out, err = d.verifySampled(id, drafts, generated)
	}
	if err != nil {
		return nil, err
	}
	d.hist = append(append(d.hist, id), out[:len(out)-1]...)
	if a := len(out) - 1; a >= len(drafts) {
		// all kept (a draft cut short by --draft-p-min too): longer
		d.k = nextDraft(d.k, d.k, d.kmax)
	} else {
		d.k = nextDraft(len(drafts), a, d.kmax)
	}
	if d.seq.Pos() > len(d.hist) {
		if err := d.seq.Rewind(len(d.hist)); err != nil {
			d.st.Note, d.kmax = fmt.Sprintf("the draft model cannot rewind (%v): plain decoding", err), 0
		}
	}
	d.ctl.guessDone(time.Since(start), len(out), len(drafts)+1, &d.st)
	return out, nil
}

// draft brings the draft sequence up to the committed ids and id, then
// drafts up to k tokens. It also returns the time spent feeding the
// draft the ids before id that it had not seen (0 when it had them all).
func (d *draftDecoder) draft(id, k int, generated []int) ([]int, time.Duration, error) {
	have := d.seq.Pos()
	if have > len(d.hist) {
		if err := d.seq.Rewind(len(d.hist)); err != nil {
			return nil, 0, err
		}
		have = len(d.hist)
	}
	var catchUp time.Duration
	if have < len(d.hist) {
		start := time.Now()
		if _, err := d.seq.PrefillContext(context.Background(), d.hist[have:]); err != nil {
			return nil, 0, err
		}
		catchUp = time.Since(start)
	}
	logits, err := d.seq.Decode(id)
	if err != nil {
		return nil, 0, err
	}
	hist := append(generated[:len(generated):len(generated)], make([]int, 0, k)...)
	var drafts []int
	for i := range k {
		var tok int
		var pr float64
		if d.smp.Greedy() {
			tok = d.smp.Sample(logits, hist)
			pr = softmaxAt(logits, tok)
		} else {
			for len(d.q) <= i {
				d.q = append(d.q, make([]float32, len(logits)))
			}
			q := d.smp.Probs(d.q[i], logits, hist)
			tok = d.smp.Draw(q)
			pr = float64(q[tok])
		}
		if pr < d.pmin {
			break
		}
		drafts = append(drafts, tok)
		hist = append(hist, tok)
		if i == k-1 {
			break
		}
		if logits, err = d.seq.Decode(tok); err != nil {
			return nil, 0, err
		}
	}
	return drafts, catchUp, nil
}

// softmaxAt is the probability of id under the softmax of logits.
func softmaxAt(logits []float32, id int) float64 {
	mx := logits[sample.Argmax(logits)]
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	return math.Exp(float64(logits[id]-mx)) / sum
}

// verifySampled verifies drafts drawn from the draft's distributions d.q
// by the rejection rule.
func (d *draftDecoder) verifySampled(id int, drafts, generated []int) ([]int, error) {
	ids := append([]int{id}, drafts...)
	rows := make([]int, len(ids))
	for i := range rows {
		rows[i] = i
	}
	logits, err := d.t.Run(&engine.Pass{IDs: ids, Logits: rows})
	if err != nil {
		return nil, err
	}
	hist := append(generated[:len(generated):len(generated)], make([]int, 0, len(ids))...)
	if cap(d.p) < len(logits.Row(0)) {
		d.p = make([]float32, len(logits.Row(0)))
	}
	var out []int
	n := 0
	for i, x := range drafts {
		p := d.smp.Probs(d.p, logits.Row(i), hist)
		q := d.q[i]
		if q[x] > 0 && d.smp.Float64()*float64(q[x]) < float64(p[x]) {
			out = append(out, x)
			hist = append(hist, x)
			n++
			continue
		}
		// rejected: draw from max(0, p-q), renormalized
		for j := range p {
			p[j] = max(0, p[j]-q[j])
		}
		tok := d.smp.Draw(p)
		if tok < 0 { // p <= q everywhere: p == q up to rounding
			tok = d.smp.Sample(logits.Row(i), hist)
		}
		out = append(out, tok)
		break
	}
	if n == len(drafts) {
		out = append(out, d.smp.Sample(logits.Row(n), hist))
	}
	if err := d.t.Commit(rows[:n+1]); err != nil {
		return nil, err
	}
	d.st.Passes++
	d.st.Verify++
	d.st.Rows += len(ids)
	d.st.Drafted += len(drafts)
	d.st.Accepted += n
	d.st.Tokens += len(out)
	return out, nil
}
