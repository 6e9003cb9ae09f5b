package limits

import "testing"

func TestSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"128M": 128 << 20, "3G": 3 << 30, "1000": 1000, "2K": 2048} {
		var s Size
		if err := s.Set(in); err != nil || int64(s) != want {
			t.Errorf("Set(%q): %d, %v; want %d", in, s, err, want)
		}
		if back := s.String(); back != in {
			t.Errorf("String of %q: %q", in, back)
		}
	}
	for _, bad := range []string{"0", "-1M", "lots", "1T", ""} {
		var s Size
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}
