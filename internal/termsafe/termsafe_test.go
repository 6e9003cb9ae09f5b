package termsafe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestString: escapes, controls, bidi overrides and broken UTF-8 become
// visible escapes; printable text (non-ASCII included) is unchanged.
func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"Qwen/Qwen3-0.6B":    "Qwen/Qwen3-0.6B",
		"модель-日本語.gguf":    "модель-日本語.gguf",
		"a\x1b[2Jb":          `a\x1b[2Jb`,
		"\x1b]0;pwned\x07":   `\x1b]0;pwned\x07`,
		"x\ry":               `x\x0dy`,
		"tab\there\nline":    `tab\x09here\x0aline`,
		"del\x7f":            `del\x7f`,
		"c1\u009b31m":        `c1\x9b31m`,
		"evil\u202egguf.exe": `evil\u202egguf.exe`,
		"iso\u2066x\u2069":   `iso\u2066x\u2069`,
		"bad\xffutf8\xc3":    `bad\xffutf8\xc3`,
		`back\slash`:         `back\slash`,
		"":                   "",
		"sep\u2028":          `sep\u2028`,
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzString: whatever the input, the output is valid UTF-8 with no rune
// that acts on a terminal, and clean input comes back unchanged.
func FuzzString(f *testing.F) {
	for _, s := range []string{"a\x1b[31mb", "\xff\xfe", "ok", "\u202e\u0085", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q: %q", s, out)
		}
		for _, r := range out {
			if unsafe(r) {
				t.Fatalf("%q kept %U", s, r)
			}
		}
		if clean(s) && out != s {
			t.Fatalf("clean %q changed to %q", s, out)
		}
		if !clean(s) && !strings.Contains(out, `\`) {
			t.Fatalf("%q escaped without an escape: %q", s, out)
		}
	})
}

// TestError: a wrapped error's message is escaped and it still unwraps.
func TestError(t *testing.T) {
	base := errors.New("file \x1b[2J.gguf")
	err := Error(fmt.Errorf("pull: %w", base))
	if err.Error() != `pull: file \x1b[2J.gguf` || !errors.Is(err, base) {
		t.Errorf("%q", err)
	}
	if Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}
