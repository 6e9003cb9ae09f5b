package kernel

import "testing"

// TestPrefetchSlots: the hints (PrefetchSlots, PrefetchRun) take any start, stride and count, in or
// out of the slice, without panicking, and leaves the values as they
// were.
func TestPrefetchSlots(t *testing.T) {
	s := make([]uint16, 1000)
	for i := range s {
		s[i] = uint16(i)
	}
	for _, c := range [][3]int{{0, 1, 1}, {5, 100, 10}, {5, 100, 1000}, {999, 1, 5}, {1000, 1, 1}, {-1, 4, 2}, {3, 0, 4}, {3, -2, 4}, {0, 1000, 3}, {7, 3, 0}} {
		PrefetchSlots(s, c[0], c[1], c[2])
		PrefetchSlots(make([]float32, 1000), c[0], c[1], c[2])
		PrefetchSlots(make([]uint8, 1000), c[0], c[1], c[2])
		PrefetchRun(s, c[0], c[1]*c[2]) // runs past the end, empty, negative
		PrefetchRun(make([]float32, 1000), c[0], c[1]*c[2])
	}
	PrefetchSlots([]float32(nil), 0, 1, 1)
	PrefetchRun([]uint8(nil), 0, 64)
	for i, v := range s {
		if v != uint16(i) {
			t.Fatalf("s[%d] = %d after the hints, want %d", i, v, i)
		}
	}
}
