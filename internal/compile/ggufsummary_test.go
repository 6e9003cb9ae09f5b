package compile

import "testing"

func TestGGUFSummaryDescribe(t *testing.T) {
	s := GGUFSummary{Types: map[string][]string{"w8": {"Q5_0", "Q8_0"}, "q4k": {"Q4_K"}}}
	want := "the Q4_K weights were kept 4-bit as their super-blocks (q4k-p, exactly); " +
		"the Q5_0, Q8_0 weights were requantized to 8 bits per weight, one scale per row (w8: a small change, see docs/formats.md)"
	if got := s.Describe(); got != want {
		t.Fatalf("Describe:\n got %s\nwant %s", got, want)
	}
}
