package aotlm_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
)

func TestEmbedsIDs(t *testing.T) {
	e := aotlm.NewEmbeds(3)
	a, b := [32]byte{1}, [32]byte{2}
	rows := []float32{1, 2, 3, 4, 5, 6}
	ida, err := e.Add(a, rows)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := aotlm.NewEmbeds(3).Add(a, []float32{9, 9, 9, 9, 9, 9})
	idb, _ := e.Add(b, rows[:3])
	if len(ida) != 2 || !slices.Equal(ida, again) || slices.Contains(ida, idb[0]) {
		t.Fatalf("ids of a %v, of a in another set %v, of b %v", ida, again, idb)
	}
	for _, id := range append(ida, idb...) {
		if !aotlm.IsEmbedID(id) {
			t.Fatalf("id %d is not an embedding id", id)
		}
	}
	if r := e.Row(ida[1]); !slices.Equal(r, []float32{4, 5, 6}) {
		t.Fatalf("row 1 of a: %v", r)
	}
	if e.Row(idb[0]+1) != nil || e.Row(5) != nil {
		t.Fatal("a row past a block, or a token id, names a row")
	}
	for _, bad := range [][]float32{nil, {1, 2}} {
		if _, err := e.Add(a, bad); err == nil || !strings.Contains(err.Error(), "whole rows") {
			t.Errorf("%d values: %v", len(bad), err)
		}
	}
}

// TestEmbedsPrefill: a prompt holding embedding rows (random, of the
// model's width) on a compiled model: a second prompt with other rows in
// their place reuses the cache only up to them and gives what a fresh
// session gives; the same rows again reuse the cache past them.
func TestEmbedsPrefill(t *testing.T) {
	for _, mode := range []string{"hybrid", "kv"} {
		m := stories(t, mode)
		width := 64 // stories260K's embedding width
		rng := rand.New(rand.NewPCG(1, 2))
		block := func() []float32 {
			r := make([]float32, 5*width)
			for i := range r {
				r[i] = float32(rng.NormFloat64())
			}
			return r
		}
		emb := aotlm.NewEmbeds(width)
		ida, err := emb.Add([32]byte{1}, block())
		if err != nil {
			t.Fatal(err)
		}
		idb, _ := emb.Add([32]byte{2}, block())
		text := m.Tokenizer().Encode(" the cat sat on the mat and", tokOpts)
		prompt := func(img []int) []int {
			return append(append(append([]int{m.BOS()}, text[:3]...), img...), text[3:]...)
		}
		s, _ := m.NewSession(0)
		defer s.Close()
		gen := func(s *aotlm.Session, ids []int) *aotlm.Result {
			t.Helper()
			res, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, MaxTokens: 12, Embeds: emb}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := gen(s, prompt(ida))
		second := gen(s, prompt(idb))
		if second.Reused != 4 {
			t.Errorf("%s: other rows reused %d ids, want the 4 before them", mode, second.Reused)
		}
		fresh, _ := m.NewSession(0)
		defer fresh.Close()
		if want := gen(fresh, prompt(idb)); !slices.Equal(second.IDs, want.IDs) {
			t.Errorf("%s: after other rows %v, fresh %v", mode, second.IDs, want.IDs)
		}
		if slices.Equal(first.IDs, second.IDs) {
			t.Errorf("%s: different rows gave the same ids %v", mode, first.IDs)
		}
		third := gen(s, append(prompt(idb), second.IDs...))
		if third.Reused < len(prompt(idb))+len(second.IDs)-1 {
			t.Errorf("%s: the same rows again reused %d", mode, third.Reused)
		}
		if _, err := fresh.Generate(context.Background(), aotlm.Request{IDs: prompt(ida), MaxTokens: 2}, nil); err == nil ||
			!strings.Contains(err.Error(), "holds none") {
			t.Errorf("%s: embedding ids without rows: %v", mode, err)
		}
	}
}

// TestEmbedsAtPositions: rows added with relative rotary positions
// (AddAt, an M-RoPE image's (0, row, col)) are placed from the next text
// position, and the text after them continues from their largest
// component plus one; rows added without positions and text take
// consecutive positions. A block is placed whole: a prompt that enters
// one past its first row is refused, and a reuse point inside one moves
// back to its first row. Malformed positions are refused.
func TestEmbedsAtPositions(t *testing.T) {
	e := aotlm.NewEmbeds(2)
	// a 2x3 image: rows (0, r, c)
	img, err := e.AddAt([32]byte{7}, make([]float32, 12), []int{0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 1, 0, 0, 1, 1, 0, 1, 2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := e.Add([32]byte{8}, make([]float32, 4))
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Concat([]int{5, 6}, img, []int{9}, plain, []int{10})
	got, err := aotlm.RotaryPositions(ids, e, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{
		10, 10, 10, 11, 11, 11, // text
		12, 12, 12, 12, 12, 13, 12, 12, 14, 12, 13, 12, 12, 13, 13, 12, 13, 14, // the image at 12
		15, 15, 15, // text from 12 + max(2, 3)
		16, 16, 16, 17, 17, 17, // rows without positions: like text
		18, 18, 18,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("positions\n%v\nwant\n%v", got, want)
	}
	if _, err := aotlm.RotaryPositions(ids[3:], e, 0, 3); err == nil || !strings.Contains(err.Error(), "without the rows before it") {
		t.Errorf("a prompt entering the image at its second row: %v", err)
	}
	if _, err := aotlm.RotaryPositions(ids, e, 0, 1); err == nil {
		t.Error("rows of 3 components placed for a model of 1")
	}
	for at, want := range map[int]int{0: 0, 2: 2, 3: 2, 7: 2, 8: 8, 9: 9, 10: 10} {
		if got := e.BlockStart(ids, at); got != want {
			t.Errorf("reuse point %d moves to %d, want %d", at, got, want)
		}
	}
	for _, c := range []struct {
		pos   []int
		comps int
		want  string
	}{
		{[]int{0, 0, 0}, 3, "rotary position values"},
		{[]int{0, 0, 0, 0, 0, -1}, 3, "out of range"},
		{[]int{0, 0, 0, 0}, 2, "components next to rows of 3"},
		{[]int{0, 1}, 0, "rotary position values"},
	} {
		if _, err := e.AddAt([32]byte{9}, make([]float32, 4), c.pos, c.comps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("positions %v of %d components: %v, want %q", c.pos, c.comps, err, c.want)
		}
	}
}
