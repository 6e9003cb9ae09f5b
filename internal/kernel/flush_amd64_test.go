//go:build !purego

package kernel

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestFlushLines runs both flush loops (CLFLUSH, and CLFLUSHOPT where the
// CPU has it) over ranges with partial lines at either end and checks
// that the bytes stay as they were.
func TestFlushLines(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	buf := make([]byte, 4096+128)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	want := bytes.Clone(buf)
	saved := hasFlushOpt
	defer func() { hasFlushOpt = saved }()
	for _, opt := range []bool{false, true} {
		if opt && !saved {
			t.Log("no CLFLUSHOPT on this CPU: its loop does not run")
			continue
		}
		hasFlushOpt = opt
		for _, c := range [][2]int{{0, 64}, {5, 3*64 + 9}, {63, 1}, {1, 4096}, {64, 0}} {
			FlushCaches(buf[c[0] : c[0]+c[1]])
		}
		if !bytes.Equal(buf, want) {
			t.Fatalf("CLFLUSHOPT %v: flushing changed the bytes", opt)
		}
	}
}
