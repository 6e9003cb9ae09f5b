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
	if got := follow(text, []int{1, 2, 3}, 2); !slices.Equal(got, []int{7, 8}) {
		t.Errorf("latest occurrence: %v, want [7 8]", got)
	}
	if got := follow(text, []int{3, 9}, 5); !slices.Equal(got, []int{1, 2, 3, 7, 8}) {
		t.Errorf("k tokens: %v", got)
	}
	if got := follow(text, []int{4}, 3); got != nil {
		t.Errorf("absent key: %v, want nil", got)
	}
	if got := follow([]int{5, 6}, []int{5, 6}, 3); got != nil {
		t.Errorf("the key itself at the end: %v, want nil", got)
	}
	d := &lookupDecoder{nmax: 3, nmin: 1, corpus: []int{4, 4, 6}}
	if got := d.draft([]int{9, 8, 4}, 4); !slices.Equal(got, []int{6}) {
		t.Errorf("corpus fallback: %v, want [6] (after the latest 4)", got)
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
	c := newControl(Adaptive{})
	for c.plainNext() {
		c.plainDone(time.Millisecond, &st)
	}
	for range warmRounds {
		c.guessDone(3*time.Millisecond, 2, 8, &st) // 2 tokens for the price of 3
	}
	if !c.plainNext() || st.Fallbacks != 1 {
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
	c.guessDone(20*time.Millisecond, 4, 8, &st) // costs 20, can return 8 at most
	c.guessDone(20*time.Millisecond, 4, 8, &st)
	if !c.never || st.Note == "" {
		t.Fatalf("a hopeless pass did not stop guessing (%+v, %q)", c, st.Note)
	}
	off := newControl(Adaptive{Off: true})
	off.plainDone(time.Millisecond, &st)
	for range 20 {
		off.guessDone(time.Second, 1, 2, &st)
	}
	if off.plainNext() {
		t.Fatal("Off fell back")
	}
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
