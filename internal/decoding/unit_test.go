package decoding

import (
	"slices"
	"testing"
	"time"
)

// TestFollow: prompt lookup drafts what followed the latest earlier
// occurrence of the key, never the key's own position, at most k tokens.
func TestFollow(t *testing.T) {
	text := []int{1, 2, 3, 9, 1, 2, 3, 7, 8, 1, 2, 3}
	for _, periodic := range []bool{false, true} {
		if got := follow(text, []int{1, 2, 3}, 2, periodic); !slices.Equal(got, []int{7, 8}) {
			t.Errorf("latest occurrence: %v, want [7 8]", got)
		}
		if got := follow(text, []int{3, 9}, 5, periodic); !slices.Equal(got, []int{1, 2, 3, 7, 8}) {
			t.Errorf("k tokens: %v", got)
		}
		if got := follow(text, []int{4}, 3, periodic); got != nil {
			t.Errorf("absent key: %v, want nil", got)
		}
		if got := follow([]int{5, 6}, []int{5, 6}, 3, periodic); got != nil {
			t.Errorf("the key itself at the end: %v, want nil", got)
		}
	}
	// a loop of period 3 ("x y z x y z x y"): the continuation after the
	// latest earlier "x y" is "z x y", and periodically it goes on
	loop := []int{4, 5, 6, 4, 5, 6, 4, 5}
	if got := follow(loop, []int{4, 5}, 7, false); !slices.Equal(got, []int{6, 4, 5}) {
		t.Errorf("loop, not periodic: %v, want [6 4 5]", got)
	}
	if got := follow(loop, []int{4, 5}, 7, true); !slices.Equal(got, []int{6, 4, 5, 6, 4, 5, 6}) {
		t.Errorf("loop, periodic: %v, want [6 4 5 6 4 5 6]", got)
	}
	if got := follow([]int{7, 7}, []int{7}, 4, true); !slices.Equal(got, []int{7, 7, 7, 7}) {
		t.Errorf("a repeated token, periodic: %v, want [7 7 7 7]", got)
	}
	d := &lookupDecoder{nmax: 3, nmin: 1, corpus: []int{4, 4, 6}}
	if got := d.draft([]int{9, 8, 4}, 4); !slices.Equal(got, []int{6}) {
		t.Errorf("corpus fallback: %v, want [6] (after the latest 4, the corpus not continued)", got)
	}
}

// TestPool: the n-gram pool keeps at most G n-grams per key, drops
// duplicates, and replaces the oldest first.
func TestPool(t *testing.T) {
	d := &lookaheadDecoder{g: 2, pool: map[int]*ring{}}
	d.add(5, []int{1, 2})
	d.add(5, []int{1, 2})
	d.add(5, []int{3, 4})
	if r := d.pool[5]; len(r.grams) != 2 {
		t.Fatalf("pool %v: want 2 n-grams", r.grams)
	}
	d.add(5, []int{6, 7})
	if got := d.pool[5].grams; !slices.Equal(got[0], []int{6, 7}) || !slices.Equal(got[1], []int{3, 4}) {
		t.Errorf("after a third n-gram: %v, want the oldest replaced", got)
	}
}

// TestControl: guessing that chooses fewer tokens than its passes cost
// falls back to plain decoding and retries later; a pass that costs more
// than it could ever return stops guessing for good; Off never switches.
func TestControl(t *testing.T) {
	var st Stats
	c := probed(&st, nil)
	for i := 0; !c.plainNext() && i < warmRounds; i++ {
		c.guessDone(3*time.Millisecond, 2, 8, &st) // 2 tokens for the price of 3
	}
	if !c.plainNext() || st.Fallbacks != 1 || c.left != firstBackoff {
		t.Fatalf("a losing strategy kept guessing (%+v)", c)
	}
	for c.plainNext() {
		c.plainDone(time.Millisecond, &st)
	}
	for range warmRounds {
		c.guessDone(2*time.Millisecond, 4, 8, &st) // 4 tokens for the price of 2
	}
	if c.plainNext() {
		t.Fatal("a winning strategy fell back")
	}
	for range neverRounds {
		c.guessDone(20*time.Millisecond, 4, 16, &st) // costs 20, can return 16 at most
	}
	if !c.never || st.Note == "" {
		t.Fatalf("a hopeless pass did not stop guessing (%+v, %q)", c, st.Note)
	}
	off := newControl(Adaptive{Off: true}, nil)
	off.plainDone(time.Millisecond, &st)
	for range 20 {
		off.guessDone(time.Second, 1, 2, &st)
	}
	if off.plainNext() {
		t.Fatal("Off fell back")
	}
}

// TestControlHopeless: a round that costs more than it could return on
// its first timing stops guessing for a bounded stretch; confirmed by a
// second timing, for good.
func TestControlHopeless(t *testing.T) {
	var st Stats
	c := probed(&st, nil)
	c.guessDone(5*time.Millisecond, 1, 3, &st) // a 3-token round for 5 plain passes
	if !c.plainNext() || c.never || c.left != hopelessBackoff || st.Note == "" {
		t.Fatalf("after one hopeless round: %+v, note %q", c, st.Note)
	}
	for c.plainNext() {
		c.plainDone(time.Millisecond, &st)
	}
	c.guessDone(5*time.Millisecond, 1, 3, &st)
	if !c.never {
		t.Fatalf("a second hopeless round did not stop guessing for good: %+v", c)
	}
}

// TestControlMisses: steps that paid for a guess and found none worth
// verifying (a draft model below its confidence threshold) count against
// guessing: one token for the price of the guess and the plain pass.
func TestControlMisses(t *testing.T) {
	var st Stats
	c := probed(&st, nil)
	for i := 0; i < 2*warmRounds && !c.plainNext(); i++ {
		c.missDone(2*time.Millisecond, &st)
	}
	if !c.plainNext() || c.never || st.Fallbacks != 1 {
		t.Fatalf("misses costing two plain passes each did not make the strategy fall back: %+v", c)
	}
	c = probed(&st, nil)
	for range 4 * warmRounds {
		c.guessDone(2*time.Millisecond, 5, 6, &st) // 5 tokens for 2
		c.missDone(1100*time.Microsecond, &st)     // an occasional cheap miss
	}
	if c.plainNext() {
		t.Fatalf("cheap misses between paying rounds made the strategy fall back: %+v", c)
	}
}

// TestControlInterrupted: a pass that takes many times its usual time
// (the process was descheduled, or collected garbage) neither turns a
// paying strategy off nor makes it fall back: the costs compared are low
// envelopes of the times, not their averages. A lasting slowdown of the
// rounds is still followed.
func TestControlInterrupted(t *testing.T) {
	var st Stats
	c := newControl(Adaptive{}, nil)
	c.plainDone(40*time.Millisecond, &st) // an interrupted probe
	for c.plainNext() {
		c.plainDone(time.Millisecond, &st)
	}
	for i := range 40 {
		d := 2 * time.Millisecond // 4 tokens for the price of 2
		if i%10 == 5 {
			d = 50 * time.Millisecond
		}
		c.guessDone(d, 4, 5, &st)
		if c.plainNext() {
			t.Fatalf("round %d: interrupted rounds stopped a paying strategy (%+v, %q)", i, c, st.Note)
		}
	}
	for i := range 200 {
		c.guessDone(6*time.Millisecond, 4, 5, &st) // now 4 tokens for the price of 6
		if c.plainNext() {
			if c.never {
				t.Fatalf("a lasting slowdown turned guessing off for good after %d rounds", i)
			}
			return
		}
	}
	t.Fatal("a lasting slowdown never made the strategy fall back")
}

// TestNextDraft: lookup's draft length doubles while every drafted token
// is accepted (up to the most), and falls to one more than were accepted
// otherwise.
func TestNextDraft(t *testing.T) {
	for _, c := range []struct{ n, a, kmax, want int }{
		{2, 2, 8, 4}, {4, 4, 8, 8}, {8, 8, 8, 8}, {6, 6, 7, 7},
		{2, 0, 8, 1}, {8, 3, 8, 4}, {1, 1, 8, 2}, {4, 1, 8, 2}, {3, 0, 1, 1},
	} {
		if got := nextDraft(c.n, c.a, c.kmax); got != c.want {
			t.Errorf("nextDraft(%d drafted, %d accepted, most %d) = %d, want %d", c.n, c.a, c.kmax, got, c.want)
		}
	}
}

// TestControlMemory: a generation starts from what the last one under the
// same key measured: after guessing proved hopeless, the next generation
// decodes plainly from its first token (and says why); after guessing
// paid, it guesses from its first token, without timing plain passes
// first. Without a key nothing carries over.
func TestControlMemory(t *testing.T) {
	var st Stats
	key := struct{ name string }{t.Name()}
	c := probed(&st, key)
	for i := 0; !c.never && i < 10; i++ {
		c.guessDone(5*time.Millisecond, 1, 3, &st)
		for c.left > 0 && !c.never {
			c.plainDone(time.Millisecond, &st)
		}
	}
	if !c.never {
		t.Fatal("hopeless rounds did not stop guessing")
	}
	c.close()
	next := newControl(Adaptive{}, key)
	if !next.plainNext() || next.left == 0 || next.resumeNote() == "" {
		t.Fatalf("the generation after a hopeless one guesses at once: %+v", next)
	}
	if fresh := newControl(Adaptive{}, nil); fresh.left != 0 || fresh.probe == 0 {
		t.Fatalf("a control without a key inherited state: %+v", fresh)
	}

	paying := struct{ name string }{t.Name() + "/paying"}
	c = probed(&st, paying)
	for range warmRounds {
		c.guessDone(2*time.Millisecond, 4, 5, &st)
	}
	c.close()
	next = newControl(Adaptive{}, paying)
	if next.plainNext() || next.plain != c.plain {
		t.Fatalf("the generation after a paying one does not guess at once: %+v", next)
	}
}

// probed is a control under key (nil: none) that has timed its plain
// probes, of 1 ms each.
func probed(st *Stats, key any) control {
	c := newControl(Adaptive{}, key)
	for c.plainNext() {
		c.plainDone(time.Millisecond, st)
	}
	return c
}

// TestControlMemoryGainNotKept: a fallback because the guesses failed
// (the text did not repeat) does not carry over: the next generation,
// whose text may, guesses from its first token.
func TestControlMemoryGainNotKept(t *testing.T) {
	var st Stats
	key := struct{ name string }{t.Name()}
	c := probed(&st, key)
	for i := 0; i < warmRounds && !c.plainNext(); i++ {
		c.guessDone(2*time.Millisecond, 1, 3, &st) // 1 token for the price of 2
	}
	if !c.plainNext() || c.never {
		t.Fatalf("failing guesses did not fall back (or were judged hopeless): %+v", c)
	}
	c.close()
	if next := newControl(Adaptive{}, key); next.plainNext() {
		t.Fatalf("a fallback for failed guesses carried over to the next generation: %+v", next)
	}
}

// share is a Sharer of a fixed share.
type share float64

func (s share) Share() float64 { return float64(s) }

// TestControlShared: rounds that choose 3 tokens for the time of 2 plain
// passes pay on a pass of their own (share 1), and keep guessing, as they
// do in a pass of 3 sequences where the round's excess was a third its
// own (share 1: 3 sequences times a third); when the excess was all its
// own (share 3: the 2 others wait the round's extra plain pass too), they
// cost 4 and the strategy falls back for a while (not for good: a round's
// own time, 2 of the 4 tokens it could choose, is not hopeless). Plain
// steps are not charged.
func TestControlShared(t *testing.T) {
	for _, sh := range []share{1, 3} {
		var st Stats
		c := probed(&st, nil)
		c.sharer = sh
		for i := 0; !c.plainNext() && i < 2*warmRounds; i++ {
			c.guessDone(2*time.Millisecond, 3, 4, &st)
		}
		others := int(sh) - 1
		if fell := c.plainNext(); fell != (others > 0) || c.never {
			t.Errorf("share %v: fell back %v (for good: %v) after %d rounds (%d fallbacks)", sh, fell, c.never, c.rounds, st.Fallbacks)
		}
		if c.plain != float64(time.Millisecond) {
			t.Errorf("%d others: the plain pass's cost is %v ns, want %v", others, c.plain, float64(time.Millisecond))
		}
	}
}
