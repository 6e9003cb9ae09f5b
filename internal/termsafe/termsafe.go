// Package termsafe makes text that a server or a file chose safe to print
// on a terminal: control characters (escape sequences among them), bidi
// overrides and invalid UTF-8 are shown as Go escapes instead of acting on
// the terminal.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every rune that could move the cursor, change
// colors, retitle the window or reorder text replaced by its escape
// (\x1b, \u202e); a backslash is kept as it is. Printable text is returned
// unchanged.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafe(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// clean reports whether s needs no escaping.
func clean(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || unsafe(r) {
			return false
		}
		i += n
	}
	return true
}

// unsafe reports whether r acts on a terminal or on the order of the
// text around it: C0 and C1 controls, DEL, the bidi embeddings, overrides
// and isolates, and the line and paragraph separators.
func unsafe(r rune) bool {
	switch {
	case unicode.IsControl(r): // C0, DEL, C1
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return false
}

// Error wraps err so that its message is escaped by String (for errors
// that quote what a server sent); errors.Is and errors.As see err.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return safeError{err}
}

type safeError struct{ err error }

func (e safeError) Error() string { return String(e.err.Error()) }
func (e safeError) Unwrap() error { return e.err }
