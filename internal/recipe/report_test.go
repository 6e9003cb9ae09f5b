package recipe

import "testing"

// TestTerminalSafeNames: a tensor name with escape sequences or newlines is
// printed quoted; a plain one as is.
func TestTerminalSafeNames(t *testing.T) {
	for in, want := range map[string]string{
		"blk.0.attn_q.weight":          "blk.0.attn_q.weight",
		"x\x1b[2Jy":                    `"x\x1b[2Jy"`,
		"a\nb":                         `"a\nb"`,
		"model.layers.0.ünïcode":       "model.layers.0.ünïcode",
		"bad\xffutf8":                  `"bad\xffutf8"`,
		"tab\there":                    `"tab\there"`,
		"quote\"d":                     `"quote\"d"`,
		"\u202eright-to-left override": `"\u202eright-to-left override"`,
	} {
		if got := terminalSafe(in); got != want {
			t.Errorf("terminalSafe(%q) = %s, want %s", in, got, want)
		}
	}
}
