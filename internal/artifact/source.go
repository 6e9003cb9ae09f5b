package artifact

import (
	"fmt"
	"github.com/aotlm/aotlm/internal/mmapfile"
	"hash/crc32"
	"io"
)

// source is the artifact's bytes: a read-only mapping of the whole file
// when data is non-nil, else an io.ReaderAt.
type source struct {
	data    []byte // the mapped file, or nil
	r       io.ReaderAt
	size    int64
	region  *mmapfile.Region // the opened file behind data and r
	closeFn func() error
}

// slice returns bytes [off, off+n) of the file: a view of the mapping (no
// copy) or a freshly read buffer. The range must lie inside the file.
func (s *source) slice(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > s.size || n > s.size-off {
		panic(fmt.Sprintf("artifact: range [%d,+%d) outside the %d-byte file", off, n, s.size))
	}
	if s.data != nil {
		return s.data[off : off+n : off+n], nil
	}
	b := make([]byte, n)
	if _, err := s.r.ReadAt(b, off); err != nil && !(err == io.EOF && n > 0) {
		return nil, fmt.Errorf("reading bytes %d..%d: %w", off, off+n, err)
	}
	return b, nil
}

// crc returns the CRC-32C of bytes [off, off+n), streaming when unmapped so
// that a multi-gigabyte weights section never sits in memory.
func (s *source) crc(off, n int64) (uint32, error) {
	if s.data != nil || n <= 1<<20 {
		b, err := s.slice(off, n)
		if err != nil {
			return 0, err
		}
		return checksum(b), nil
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(s.r, off, n)); err != nil {
		return 0, fmt.Errorf("reading bytes %d..%d: %w", off, off+n, err)
	}
	return h.Sum32(), nil
}

// close releases the mapping or file.
func (s *source) close() error {
	if s.closeFn == nil {
		return nil
	}
	err := s.closeFn()
	s.closeFn, s.data, s.region = nil, nil, nil
	return err
}

// openSource opens path read-only, memory-mapped where possible (with the
// page cache's small pages of it refreshed, mmapfile.OpenWeights), or put
// in huge pages (huge, mmapfile.OpenHugePages).
func openSource(path string, huge bool) (*source, error) {
	open := mmapfile.OpenWeights
	if huge {
		open = mmapfile.OpenHugePages
	}
	m, err := open(path)
	if err != nil {
		return nil, err
	}
	return &source{data: m.Data, r: m, size: m.Size, region: m, closeFn: m.Close}, nil
}
