package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestHugePagesNote: bench advises --hugepages only for a large artifact
// that streamed mostly through 4 KiB pages on a kernel with huge pages,
// without the flag; the table prints the advice on a line of its own.
func TestHugePagesNote(t *testing.T) {
	for _, c := range []struct {
		size       int64
		pct        float64
		put, avail bool
		want       bool
	}{
		{400 << 20, 3, false, true, true},
		{400 << 20, 49, false, true, true},
		{400 << 20, 50, false, true, false},  // mostly huge already
		{400 << 20, 100, false, true, false}, // all huge
		{400 << 20, 3, true, true, false},    // --hugepages given
		{400 << 20, 3, false, false, false},  // no huge pages to be had
		{1 << 20, 0, false, true, false},     // too small to matter
	} {
		got := hugePagesNote(c.size, c.pct, c.put, c.avail)
		if (got != "") != c.want {
			t.Errorf("%+v: note %q", c, got)
		}
	}
	var b bytes.Buffer
	r := Report{Model: "m.aot", Note: hugePagesNote(400<<20, 3, false, true)}
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nnote: the weights streamed through 4 KiB pages") || !strings.Contains(b.String(), "--hugepages") {
		t.Fatalf("table without the note:\n%s", b.String())
	}
}
