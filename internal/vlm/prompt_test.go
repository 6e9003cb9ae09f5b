package vlm

import (
	"strings"
	"testing"
)

func TestPlace(t *testing.T) {
	ph := []string{"<A>", "<B>"}
	for _, c := range []struct {
		text string
		ph   []string
		want string
		err  string
	}{
		{"hello", nil, "hello", ""},
		{"hello", ph, "<A><B>hello", ""},
		{"x <image> y <image> z", ph, "x <A> y <B> z", ""},
		{"<image> only one", ph, "", "1 <image> markers for 2 images"},
		{"<image><image><image>", ph, "", "3 <image> markers"},
	} {
		got, err := Place(c.text, c.ph)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.text, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.text, got, err, c.want)
		}
	}
	if !placeholder.MatchString("<__image_0123456789abcdef__>") || placeholder.MatchString("<__image_xyz__>") {
		t.Error("the placeholder pattern")
	}
}
