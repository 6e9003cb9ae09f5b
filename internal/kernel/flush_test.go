package kernel

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestFlushCaches: flushing leaves every byte as it was, for every length
// up to a few lines from every start within a line (the partial lines at
// either end included), across the chunk size, and on an empty slice; it
// reports a flush exactly where the build has the instruction.
func TestFlushCaches(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	buf := make([]byte, 2*flushChunk+256)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	want := bytes.Clone(buf)
	if got := FlushCaches(nil); got != canFlush {
		t.Fatalf("FlushCaches(nil) = %v, want %v", got, canFlush)
	}
	for off := range 64 {
		for n := 0; n <= 200; n += 7 {
			if got := FlushCaches(buf[off : off+n]); got != canFlush {
				t.Fatalf("start %d, %d bytes: %v, want %v", off, n, got, canFlush)
			}
		}
	}
	if got := FlushCaches(buf[3 : 2*flushChunk+131]); got != canFlush {
		t.Fatalf("%d bytes: %v, want %v", 2*flushChunk+128, got, canFlush)
	}
	if !bytes.Equal(buf, want) {
		t.Fatal("flushing changed the bytes")
	}
}
