package recipe

import (
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/quant"
)

// TestAutoRecipe checks the greedy choice: most sensitive first, skipping
// a tensor that would break the budget but taking a later one that fits,
// and the size arithmetic.
func TestAutoRecipe(t *testing.T) {
	r, err := quant.Preset("w4a16-lpbq")
	if err != nil {
		t.Fatal(err)
	}
	rows := []Row{
		{Name: "a", KL: 0.3, Params: 100, Bits: 4, W8Bits: 9},   // +500
		{Name: "b", KL: 0.2, Params: 1000, Bits: 4, W8Bits: 9},  // +5000: does not fit
		{Name: "c", KL: 0.1, Params: 100, Bits: 4, W8Bits: 9},   // +500
		{Name: "d", KL: 0.05, Params: 100, Bits: 9, W8Bits: 9},  // already 8-bit
		{Name: "e", KL: 0.01, Params: 1000, Bits: 4, W8Bits: 9}, // no room left
	}
	// other 1000 bits, 2300 params: base = 1000 + 4*2200 + 9*100 = 10700 bits
	got, est, kept, err := Auto(r, rows, 1000, 2300, 0, 11800.0/8, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0] != "a" || kept[1] != "c" {
		t.Fatalf("kept %v, want [a c]", kept)
	}
	if math.Abs(est-11700.0/2300) > 1e-9 {
		t.Errorf("estimate %v bits per weight, want %v", est, 11700.0/2300)
	}
	if s := got.SchemeFor("a"); s.Kind != quant.KindW8 {
		t.Errorf("a gets %v", s)
	}
	if s := got.SchemeFor("b"); s.Kind != quant.KindLPBQ {
		t.Errorf("b gets %v", s)
	}
	if _, _, _, err := Auto(r, rows, 1000, 2300, 4, 0, false); err == nil {
		t.Error("a budget below the recipe itself was accepted")
	}
	// per bit: y and z (2e-4, 1.6e-4 per bit) before x (6e-5 per bit),
	// which no longer fits; by KL alone x first, then y
	rows = []Row{
		{Name: "x", KL: 0.3, Params: 1000, Bits: 4, W8Bits: 9}, // +5000
		{Name: "y", KL: 0.1, Params: 100, Bits: 4, W8Bits: 9},  // +500
		{Name: "z", KL: 0.08, Params: 100, Bits: 4, W8Bits: 9}, // +500
	}
	// base = 1000 + 4*1200 = 5800 bits; budget 5800 + 5500
	for _, c := range []struct {
		perBit bool
		want   string
	}{{false, "x,y"}, {true, "y,z"}} {
		_, _, kept, err := Auto(r, rows, 1000, 1200, 0, (5800+5500)/8.0, c.perBit)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(kept, ","); got != c.want {
			t.Errorf("per bit %v: kept %s, want %s", c.perBit, got, c.want)
		}
	}
	for _, c := range []struct {
		in         string
		bits, byts float64
	}{{"5.5b", 5.5, 0}, {"6bpw", 6, 0}, {"1.5MB", 0, 1.5e6}, {"300000", 0, 3e5}, {"2GB", 0, 2e9}} {
		b, y, err := ParseSize(c.in)
		if err != nil || b != c.bits || y != c.byts {
			t.Errorf("ParseSize(%q) = %v, %v, %v", c.in, b, y, err)
		}
	}
	for _, bad := range []string{"", "x", "-3b", "0"} {
		if _, _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}
