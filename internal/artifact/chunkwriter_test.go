package artifact

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
)

// recorder keeps every write it is given.
type recorder struct {
	all    bytes.Buffer
	writes []int
	fail   bool
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.fail {
		return 0, errors.New("disk full")
	}
	r.writes = append(r.writes, len(p))
	return r.all.Write(p)
}

// TestChunkWriterAligns: whatever the sizes of the writes it is given
// (none, tiny, larger than a chunk), chunkWriter passes on the same bytes in
// whole writeChunk writes, only the last one shorter, so every write but
// the last starts and ends on a 2 MiB boundary.
func TestChunkWriterAligns(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	data := make([]byte, 3*writeChunk+12345)
	rng.Read(data)
	for _, maxPiece := range []int{1, 4096, writeChunk - 1, writeChunk, 5 * writeChunk} {
		rec := &recorder{}
		c := newChunkWriter(rec)
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+rng.Intn(maxPiece))
			if maxPiece == 1 && len(rest) > 1000 {
				n = min(len(rest), 1000+rng.Intn(3*writeChunk)) // keep the loop short
			}
			if got, err := c.Write(rest[:n]); got != n || err != nil {
				t.Fatalf("Write(%d) = %d, %v", n, got, err)
			}
			if _, err := c.Write(nil); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rec.all.Bytes(), data) {
			t.Fatalf("pieces up to %d: the bytes written differ", maxPiece)
		}
		for i, n := range rec.writes {
			if i < len(rec.writes)-1 && n != writeChunk {
				t.Fatalf("pieces up to %d: write %d is %d bytes, not a whole chunk (%v)", maxPiece, i, n, rec.writes)
			}
		}
		if want := len(data)/writeChunk + 1; len(rec.writes) != want {
			t.Fatalf("pieces up to %d: %d writes, want %d", maxPiece, len(rec.writes), want)
		}
	}
	// an error reaches the caller
	c := newChunkWriter(&recorder{fail: true})
	if _, err := c.Write(make([]byte, writeChunk)); err == nil {
		t.Fatal("a failing file took a whole chunk without error")
	}
}
