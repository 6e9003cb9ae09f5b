package decoding

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aotlm/aotlm/internal/sample"
)

// Lookup is prompt lookup decoding: it drafts the tokens that followed
// the latest earlier occurrence of the text's last n-gram (in the prompt,
// the generated text, or a corpus), and verifies them in one pass.
type Lookup struct {
	// NgramMax and NgramMin bound the n-gram matched, longest first
	// (defaults 3 and 1).
	NgramMax, NgramMin int
	// DraftMax is the most tokens drafted per pass (default 8, at most
	// the target's largest pass minus one); DraftMin the fewest worth a
	// verify pass (default 1): fewer are decoded plainly. Drafts start at
	// 2 tokens and grow toward DraftMax while they are accepted
	// (nextDraft).
	DraftMax, DraftMin int
	// Corpus is more text (token ids) to find matches in, after the
	// sequence itself.
	Corpus   []int
	Adaptive Adaptive
}

// Name returns "lookup".
func (l *Lookup) Name() string { return "lookup" }

func (l *Lookup) check() error {
	if l.NgramMax < 0 || l.NgramMin < 0 || l.DraftMax < 0 || l.DraftMin < 0 {
		return errors.New("lookup: n-gram and draft sizes must be >= 0")
	}
	if l.NgramMax > 0 && l.NgramMin > l.NgramMax {
		return fmt.Errorf("lookup: n-gram sizes %d..%d are reversed", l.NgramMin, l.NgramMax)
	}
	return nil
}

// Start makes a lookup decoder over t.
func (l *Lookup) Start(t Target, history []int, smp *sample.Sampler) (Decoder, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	d := &lookupDecoder{t: t, smp: smp, hist: append([]int(nil), history...), corpus: l.Corpus,
		nmax: def(l.NgramMax, 3), nmin: def(l.NgramMin, 1), kmax: def(l.DraftMax, 8), kmin: def(l.DraftMin, 1),
		ctl: newControl(l.Adaptive, memoryKey("lookup", t)), st: Stats{Strategy: l.Name()}}
	d.ctl.watch(t)
	d.kmax = min(d.kmax, t.MaxRows()-1)
	if d.kmax < 1 {
		d.st.Note = "the model's largest pass holds one row: plain decoding"
	}
	d.k = min(d.kmax, firstDraft)
	d.st.Note = d.ctl.resumeNote()
	return d, nil
}

func def(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

type lookupDecoder struct {
	t                      Target
	smp                    *sample.Sampler
	hist, corpus           []int // hist: the committed ids
	nmax, nmin, kmax, kmin int
	k                      int // the current draft length (see nextDraft)
	ctl                    control
	st                     Stats
}

// firstDraft is the draft length lookup starts with.
const firstDraft = 2

// nextDraft is the draft length after a round that drafted n tokens and
// had a of them accepted: doubled (up to kmax) when all were, else one more
// than were accepted. A pass costs more the more rows it has, so drafts
// stay short while the guesses fail and grow while they hold.
func nextDraft(n, a, kmax int) int {
	if a >= n {
		return min(max(2*n, 1), kmax)
	}
	return min(a+1, kmax)
}

func (d *lookupDecoder) Stats() Stats { return d.st }
func (d *lookupDecoder) Close()       { d.ctl.close() }

func (d *lookupDecoder) Next(id int, generated []int) ([]int, error) {
	start := time.Now()
	room := d.t.Context() - d.t.Pos() - 1 // drafts that fit after id
	var drafts []int
	if !d.ctl.plainNext() && d.kmax >= 1 {
		drafts = d.draft(append(d.hist, id), min(max(d.k, d.kmin, 1), room))
	}
	if len(drafts) < max(d.kmin, 1) {
		out, err := plainStep(d.t, d.smp, id, generated, &d.st)
		if err != nil {
			return nil, err
		}
		d.hist = append(d.hist, id)
		d.ctl.plainDone(time.Since(start), &d.st)
		return out, nil
	}
	out, err := verifyChain(d.t, d.smp, id, drafts, generated, &d.st)
	if err != nil {
		return nil, err
	}
	d.hist = append(append(d.hist, id), out[:len(out)-1]...)
	d.k = nextDraft(len(drafts), len(out)-1, d.kmax)
	d.ctl.guessDone(time.Since(start), len(out), len(drafts)+1, &d.st)
	return out, nil
}

// draft returns up to k tokens that followed the latest earlier
// occurrence of seq's last n-gram, longest n-gram first: in seq itself
// (continued periodically, see follow) and then in the corpus.
func (d *lookupDecoder) draft(seq []int, k int) []int {
	if k < 1 {
		return nil
	}
	for n := min(d.nmax, len(seq)-1); n >= d.nmin && n >= 1; n-- {
		key := seq[len(seq)-n:]
		if out := follow(seq, key, k, true); out != nil {
			return out
		}
		if out := follow(d.corpus, key, k, false); out != nil {
			return out
		}
	}
	return nil
}

// follow finds the latest occurrence of key in text with a token after it
// and returns up to k of the tokens that follow. With periodic, a
// continuation that reaches the end of text goes on with the tokens it
// drafted, as if text went on repeating its last stretch: key occurring p
// tokens before its end says the text may be in a loop of period p (a
// list, a chorus, a model repeating itself), and the draft follows the
// loop rather than stopping after p tokens.
func follow(text, key []int, k int, periodic bool) []int {
	n := len(key)
	for i := len(text) - n - 1; i >= 0; i-- {
		if !slices.Equal(text[i:i+n], key) {
			continue
		}
		out := append([]int(nil), text[i+n:min(i+n+k, len(text))]...)
		if periodic {
			for p := len(out); len(out) < k; {
				out = append(out, out[len(out)-p])
			}
		}
		return out
	}
	return nil
}
