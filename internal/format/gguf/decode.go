package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// errShort marks a read past the end of the file; callers turn it into a
// *format.Error naming the field being read.
var errShort = errors.New("past end of file")

// readError is a failure of the underlying reader, as opposed to malformed bytes.
type readError struct {
	off int64
	err error
}

func (e *readError) Error() string { return fmt.Sprintf("reading at offset %d: %v", e.off, e.err) }
func (e *readError) Unwrap() error { return e.err }

// decoder reads the header sequentially from an io.ReaderAt of known size,
// through a read-ahead window so small fields cost no system call each.
type decoder struct {
	r    io.ReaderAt
	size int64 // file size
	off  int64 // offset of the next unread byte

	win    []byte // buffered bytes of the file starting at winOff
	winOff int64
}

const windowSize = 64 << 10

func newDecoder(r io.ReaderAt, size int64) *decoder {
	return &decoder{r: r, size: size}
}

// remaining returns the number of bytes between the read position and EOF.
func (d *decoder) remaining() int64 { return d.size - d.off }

// next returns the next n bytes and advances past them. The slice is valid
// until the next call. It fails with errShort when fewer than n bytes remain.
func (d *decoder) next(n int64) ([]byte, error) {
	if n < 0 || n > d.remaining() {
		return nil, errShort
	}
	start := d.off - d.winOff
	if d.off < d.winOff || start+n > int64(len(d.win)) {
		if err := d.fill(n); err != nil {
			return nil, err
		}
		start = 0
	}
	d.off += n
	return d.win[start : start+n], nil
}

// fill loads a window of at least n bytes starting at the read position.
func (d *decoder) fill(n int64) error {
	w := max(n, windowSize)
	w = min(w, d.remaining())
	if int64(cap(d.win)) < w {
		d.win = make([]byte, w)
	}
	d.win = d.win[:w]
	got, err := d.r.ReadAt(d.win, d.off)
	if int64(got) < n {
		if err == nil || errors.Is(err, io.EOF) {
			return errShort
		}
		return &readError{off: d.off, err: err}
	}
	d.win = d.win[:got]
	d.winOff = d.off
	return nil
}

func (d *decoder) u8() (uint8, error) {
	b, err := d.next(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (d *decoder) u16() (uint16, error) {
	b, err := d.next(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.next(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.next(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string, refusing a length past the end of file
// before allocating.
func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", fmt.Errorf("string length %d: %w", n, errShort)
	}
	b, err := d.next(int64(n))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// count reads an element count and checks that count elements of at least
// minSize bytes each fit in the rest of the file, so no allocation is sized
// by an unchecked number.
func (d *decoder) count(minSize int64) (int64, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt64 || (minSize > 0 && int64(n) > d.remaining()/minSize) {
		return 0, fmt.Errorf("count %d exceeds the %d bytes left in the file", n, d.remaining())
	}
	return int64(n), nil
}
