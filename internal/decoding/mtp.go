package decoding

import (
	"errors"
	"fmt"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
)

// MTP is speculation with the model's own multi-token-prediction head
// (Qwen3.5's, compiled into the artifact, see engine.Engine.MTP): the head
// reads the target's hidden state at position j (the rows its classifier
// reads) and the token at j+1, and predicts the token at j+2. Each round
// it drafts up to DraftMax tokens, the first from the target's hidden row
// of the newest committed position and the newest chosen token, each next
// from its own hidden row and the token it drafted before; the target
// verifies the chain in one pass and keeps the prefix it would have
// chosen itself. The head keeps a cache of its own, fed the target's
// hidden rows of the kept positions, and drops its drafted rows after
// each round. Greedy output is exactly the target's; with sampling the
// drafts are drawn from the head's distribution and kept by the
// rejection rule of Draft, which keeps the target's distribution.
type MTP struct {
	// DraftMax is the most tokens drafted per pass (default 3, at most the
	// target's largest pass minus one); DraftMin the fewest worth a
	// verify pass (default 1). Drafts start at 2 tokens and grow toward
	// DraftMax while they are kept (nextDraft).
	DraftMax, DraftMin int
	Adaptive           Adaptive
}

// mtpTarget is a target with a draft head: its passes give their hidden
// rows, and it makes the head's sequence. *engine.Session implements it.
type mtpTarget interface {
	Target
	Hidden(pos int) []float32
	NewDraftHead() (*engine.Session, error)
}

// Name returns "mtp".
func (m *MTP) Name() string { return "mtp" }

// Start makes an MTP decoder over t, which must hold history and have the
// hidden row of its last position from its last pass (a prefill's). The
// head's cache starts at the first row of that pass: its attention sees
// the generated text and the prompt's last prefill pass (up to the
// largest plan's rows). A target without a draft head, or without that
// row, gets a plain decoder and a note.
func (m *MTP) Start(t Target, history []int, smp *sample.Sampler) (Decoder, error) {
	if m.DraftMax < 0 || m.DraftMin < 0 {
		return nil, fmt.Errorf("mtp: sizes %d, %d must be >= 0", m.DraftMax, m.DraftMin)
	}
	mt, ok := t.(mtpTarget)
	if !ok {
		return Plain(t, smp, m.Name(), "the model has no multi-token-prediction head: plain decoding"), nil
	}
	pos := t.Pos()
	h := mt.Hidden(pos - 1)
	if pos < 1 || h == nil {
		return Plain(t, smp, m.Name(), "no hidden row of the prompt's last token to draft from: plain decoding"), nil
	}
	last := append([]float32(nil), h...)
	head, err := mt.NewDraftHead()
	if err != nil {
		return Plain(t, smp, m.Name(), fmt.Sprintf("%v: plain decoding", err)), nil
	}
	// the head's cache starts at the first position of the target's last
	// pass (the prompt's last prefill pass) whose ids history gives: those
	// rows are read with the first draft
	base := pos - 1
	for base > 0 && base-1 < len(history) && len(history) == pos && mt.Hidden(base-1) != nil {
		base--
	}
	d := &mtpDecoder{t: mt, smp: smp, head: head, base: base, last: last, width: len(last),
		comps: head.PosComponents(), kmax: min(def(m.DraftMax, 3), t.MaxRows()-1, head.MaxRows()),
		kmin: max(def(m.DraftMin, 1), 1), ctl: newControl(m.Adaptive, memoryKey(m, t)), st: Stats{Strategy: m.Name()}}
	for j := base; j < pos-1; j++ {
		d.pendTok = append(d.pendTok, history[j+1])
		d.pendH = append(d.pendH, mt.Hidden(j)...)
	}
	d.k = min(d.kmax, firstDraft)
	d.st.Note = d.ctl.resumeNote()
	if d.kmax < 1 {
		d.st.Note = "the model's largest pass holds one row: plain decoding"
	}
	return d, nil
}

type mtpDecoder struct {
	t    mtpTarget
	smp  *sample.Sampler
	head *engine.Session
	// base is the target position of the head's slot 0: slot c holds the
	// row of target position base+c (its hidden row and the next token).
	base int
	// pendTok and pendH are the rows the head has not read yet, of the
	// target positions from base+head.Pos() on: the token after each and
	// its hidden row.
	pendTok []int
	pendH   []float32
	last    []float32 // the target's hidden row of its newest position
	width   int       // values of a hidden row
	comps   int       // rotary position components of a head row
	kmax    int
	kmin    int
	k       int // the current draft length (see nextDraft)
	q       [][]float32
	p       []float32
	ctl     control
	st      Stats
	scratch []float32
}

func (d *mtpDecoder) Stats() Stats { return d.st }
func (d *mtpDecoder) Close() {
	d.ctl.close()
	d.head.Close()
}

func (d *mtpDecoder) Next(id int, generated []int) ([]int, error) {
	start := time.Now()
	pos := d.t.Pos()
	if d.kmax >= 1 {
		// the row of position pos-1: its hidden row and id, the token after it
		d.pendTok = append(d.pendTok, id)
		d.pendH = append(d.pendH, d.last...)
	}
	room := d.t.Context() - pos - 1
	tried := !d.ctl.plainNext() && d.kmax >= 1 && room >= 1
	var drafts []int
	if tried {
		var err error
		var catchUp time.Duration
		if drafts, catchUp, err = d.draft(min(max(d.k, d.kmin), room), generated); err != nil {
			d.st.Note, d.kmax = fmt.Sprintf("the draft head failed (%v): plain decoding", err), 0
			d.pendTok, d.pendH, drafts = nil, nil, nil
		}
		// the adaptive control judges what a round costs: the head's
		// reading the rows of plainly decoded tokens is paid once
		start = start.Add(catchUp)
	}
	if len(drafts) < d.kmin {
		out, err := plainStep(d.t, d.smp, id, generated, &d.st)
		if err != nil {
			return nil, err
		}
		if err := d.keep(pos, nil, 1); err != nil {
			return nil, err
		}
		if tried {
			d.ctl.missDone(time.Since(start), &d.st)
		} else {
			d.ctl.plainDone(time.Since(start), &d.st)
		}
		return out, nil
	}
	ids := append([]int{id}, drafts...)
	rows := make([]int, len(ids))
	for i := range rows {
		rows[i] = i
	}
	logits, err := d.t.Run(&engine.Pass{IDs: ids, Logits: rows})
	if err != nil {
		return nil, err
	}
	var out []int
	if d.smp.Greedy() {
		out = d.walkGreedy(logits, drafts, generated)
	} else {
		out = d.walkSampled(logits, drafts, generated)
	}
	n := len(out) - 1 // drafts kept
	if err := d.keep(pos, drafts[:n], n+1); err != nil {
		return nil, err
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
	if n >= len(drafts) {
		d.k = nextDraft(d.k, d.k, d.kmax)
	} else {
		d.k = nextDraft(len(drafts), n, d.kmax)
	}
	d.ctl.guessDone(time.Since(start), len(out), len(drafts)+1, &d.st)
	return out, nil
}

// keep records the target's hidden rows of positions pos..pos+n-1 from its
// last pass (before it is committed, or a plain step's): each of the first
// n-1 becomes a head row with the kept draft after it, and the last is the
// newest position's row, whose token the next round brings.
func (d *mtpDecoder) keep(pos int, kept []int, n int) error {
	if d.kmax < 1 {
		return nil // no head to feed
	}
	for i := range n {
		h := d.t.Hidden(pos + i)
		if len(h) != d.width {
			return fmt.Errorf("mtp: the target gives no hidden row of position %d", pos+i)
		}
		if i < n-1 {
			d.pendTok = append(d.pendTok, kept[i])
			d.pendH = append(d.pendH, h...)
			continue
		}
		d.last = append(d.last[:0], h...)
	}
	return nil
}

// walkGreedy keeps the drafts the target itself chooses and returns the
// chosen tokens: the kept drafts and the target's next token.
func (d *mtpDecoder) walkGreedy(logits engine.Logits, drafts, generated []int) []int {
	hist := append(generated[:len(generated):len(generated)], make([]int, 0, len(drafts)+1)...)
	var out []int
	for i := range len(drafts) + 1 {
		tok := d.smp.Sample(logits.Row(i), hist)
		out = append(out, tok)
		hist = append(hist, tok)
		if i == len(drafts) || tok != drafts[i] {
			break
		}
	}
	return out
}

// walkSampled keeps draft x with probability min(1, p(x)/q(x)) and draws a
// rejected one's replacement from the normalized max(0, p-q).
func (d *mtpDecoder) walkSampled(logits engine.Logits, drafts, generated []int) []int {
	hist := append(generated[:len(generated):len(generated)], make([]int, 0, len(drafts)+1)...)
	if cap(d.p) < len(logits.Row(0)) {
		d.p = make([]float32, len(logits.Row(0)))
	}
	var out []int
	for i, x := range drafts {
		p := d.smp.Probs(d.p, logits.Row(i), hist)
		q := d.q[i]
		if q[x] > 0 && d.smp.Float64()*float64(q[x]) < float64(p[x]) {
			out = append(out, x)
			hist = append(hist, x)
			continue
		}
		for j := range p {
			p[j] = max(0, p[j]-q[j])
		}
		tok := d.smp.Draw(p)
		if tok < 0 { // p <= q everywhere: p == q up to rounding
			tok = d.smp.Sample(logits.Row(i), hist)
		}
		return append(out, tok)
	}
	return append(out, d.smp.Sample(logits.Row(len(drafts)), hist))
}

// draft feeds the head its pending rows (the last of them the newest
// committed position's, with the token the round feeds) and drafts up to k
// tokens after that token; the head then drops its drafted rows.
// It also returns the time spent feeding the rows of plainly decoded
// tokens, when there were more rows than a round leaves.
func (d *mtpDecoder) draft(k int, generated []int) ([]int, time.Duration, error) {
	start := time.Now()
	many := len(d.pendTok) > d.kmax+1
	logits, err := d.feed()
	if err != nil {
		return nil, 0, err
	}
	var catchUp time.Duration
	if many {
		catchUp = time.Since(start)
	}
	kept := d.head.Pos()
	hist := append(generated[:len(generated):len(generated)], make([]int, 0, k)...)
	var drafts []int
	for i := range k {
		var tok int
		if d.smp.Greedy() {
			tok = d.smp.Sample(logits, hist)
		} else {
			for len(d.q) <= i {
				d.q = append(d.q, make([]float32, len(logits)))
			}
			tok = d.smp.Draw(d.smp.Probs(d.q[i], logits, hist))
		}
		if tok < 0 {
			break
		}
		drafts = append(drafts, tok)
		hist = append(hist, tok)
		if i == k-1 {
			break
		}
		// the next row: the head's own hidden row and the token it drafted
		c := d.head.Pos() - 1
		d.scratch = append(d.scratch[:0], d.head.Hidden(c)...)
		if logits, err = d.run([]int{tok}, d.scratch, d.base+c+1, true); err != nil {
			return nil, 0, err
		}
	}
	if err := d.head.Rewind(kept); err != nil {
		return nil, 0, err
	}
	return drafts, catchUp, nil
}

// feed runs the head over its pending rows, in passes of its largest
// plan, commits them, and returns the logits of the last.
func (d *mtpDecoder) feed() ([]float32, error) {
	var logits []float32
	for len(d.pendTok) > 0 {
		n := min(len(d.pendTok), d.head.MaxRows())
		l, err := d.run(d.pendTok[:n], d.pendH[:n*d.width], d.base+d.head.Pos(), n == len(d.pendTok))
		if err != nil {
			return nil, err
		}
		logits = l
		d.pendTok = d.pendTok[n:]
		d.pendH = d.pendH[n*d.width:]
	}
	d.pendTok, d.pendH = d.pendTok[:0], d.pendH[:0]
	if logits == nil {
		return nil, errors.New("mtp: no row to draft from")
	}
	return logits, nil
}

// run runs one chain pass of the head over ids and their hidden rows for
// target positions from j on (rotary positions j+1, ...), commits it, and
// returns the last row's logits when want.
func (d *mtpDecoder) run(ids []int, rows []float32, j int, want bool) ([]float32, error) {
	pos := make([]int, 0, len(ids)*d.comps)
	for i := range ids {
		for range d.comps {
			pos = append(pos, j+i+1)
		}
	}
	sel := []int{}
	if want {
		sel = []int{len(ids) - 1}
	}
	out, err := d.head.Run(&engine.Pass{IDs: ids, Rows: rows, Positions: pos, Logits: sel})
	if err != nil {
		return nil, err
	}
	var logits []float32
	if want {
		logits = out.Row(0)
	}
	if err := d.head.Commit(seqRows(len(ids))); err != nil {
		return nil, err
	}
	return logits, nil
}

// seqRows returns 0, 1, ..., n-1.
func seqRows(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}
