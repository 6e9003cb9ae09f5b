package plan

import (
	"slices"
	"strings"
	"testing"
)

// TestAdapterBlob encodes adapter linears (one with DoRA magnitudes) and
// decodes them back, and refuses truncated or padded blobs and
// impossible sizes.
func TestAdapterBlob(t *testing.T) {
	ls := []AdapterLinear{
		{Weight: "a.weight", Rank: 2, In: 3, Out: 4, Scale: 0.5, A: []float32{1, 2, 3, 4, 5, 6}, B: []float32{-1, -2, -3, -4, -5, -6, -7, -8}},
		{Weight: "b.weight", Rank: 1, In: 2, Out: 1, Scale: 2, A: []float32{7, 8}, B: []float32{9}},
		{Weight: "c.weight", Rank: 1, In: 1, Out: 2, Scale: 1, A: []float32{3}, B: []float32{4, 5}, Magnitude: []float32{0.5, 1.5}},
	}
	b, err := EncodeAdapter(ls)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAdapter(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ls) {
		t.Fatalf("%d linears", len(got))
	}
	for i, l := range ls {
		g := got[i]
		if g.Weight != l.Weight || g.Rank != l.Rank || g.In != l.In || g.Out != l.Out || g.Scale != l.Scale || !slices.Equal(g.A, l.A) || !slices.Equal(g.B, l.B) || !slices.Equal(g.Magnitude, l.Magnitude) {
			t.Errorf("linear %d: %+v, want %+v", i, g, l)
		}
	}
	for name, bad := range map[string][]byte{
		"truncated": b[:len(b)-4], "padded": append(append([]byte{}, b...), 0, 0, 0, 0), "short": b[:2],
		"head too long": append([]byte{255, 255, 0, 0}, b[4:]...),
	} {
		if _, err := DecodeAdapter(bad); err == nil {
			t.Errorf("%s blob decoded", name)
		}
	}
	zero := strings.Replace(string(b), `"rank":2`, `"rank":0`, 1)
	if _, err := DecodeAdapter([]byte(zero)); err == nil {
		t.Error("rank 0 decoded")
	}
	if _, err := EncodeAdapter([]AdapterLinear{{Weight: "w", Rank: 1, In: 2, Out: 2, A: []float32{1}}}); err == nil {
		t.Error("an A of the wrong size encoded")
	}
	if _, err := EncodeAdapter([]AdapterLinear{{Weight: "w", Rank: 1, In: 1, Out: 2, A: []float32{1}, B: []float32{1, 2}, Magnitude: []float32{1}}}); err == nil {
		t.Error("DoRA magnitudes of the wrong size encoded")
	}
}
