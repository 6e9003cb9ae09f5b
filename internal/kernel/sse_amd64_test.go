//go:build !purego

package kernel

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestNoLegacySSEOnDirtyUpperHalves scans the amd64 assembly: within a
// function (or a macro's body), once an instruction has written a Y or
// Z register, no legacy SSE instruction (one without the V prefix) may
// touch an X register before VZEROUPPER, and no function may return
// without it. On an Intel Xeon (Emerald Rapids) one MOVSS after the
// constants of expSubVnni were loaded cost about 180 ns a call, more
// than the call's work on a 128-element row; Go's own float code is
// legacy SSE, so a kernel returning with the upper halves dirty would
// charge it to the caller.
func TestNoLegacySSEOnDirtyUpperHalves(t *testing.T) {
	wide := regexp.MustCompile(`\b[YZ]([0-9]|[12][0-9]|3[01])\b`)
	narrow := regexp.MustCompile(`\bX([0-9]|[12][0-9]|3[01])\b`)
	for _, file := range []string{"kernel_amd64.s", "q6_amd64.s"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		unit, dirty, units := "", false, 0
		for n, line := range strings.Split(string(b), "\n") {
			text := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), `\`))
			if i := strings.Index(text, "//"); i >= 0 {
				text = strings.TrimSpace(text[:i])
			}
			if strings.HasPrefix(text, "TEXT ") || strings.HasPrefix(text, "#define ") {
				unit, dirty = strings.TrimSuffix(strings.Fields(text)[1], ","), false
				units++
				continue
			}
			fields := strings.Fields(text)
			if unit == "" || len(fields) == 0 || strings.HasSuffix(fields[0], ":") || strings.HasPrefix(text, "#") {
				continue
			}
			op, args := fields[0], strings.Join(fields[1:], " ")
			switch {
			case op == "VZEROUPPER":
				dirty = false
			case strings.HasPrefix(op, "V"):
				if wide.MatchString(args) {
					dirty = true
				}
			case dirty && narrow.MatchString(args):
				t.Errorf("%s:%d (%s): %s after a Y or Z register was written, without VZEROUPPER between", file, n+1, unit, text)
			case dirty && op == "RET":
				t.Errorf("%s:%d (%s): RET with the upper halves dirty (no VZEROUPPER)", file, n+1, unit)
			}
		}
		if units < 2 {
			t.Fatalf("%s: found %d functions or macros; the scan does not read this file", file, units)
		}
	}
}
