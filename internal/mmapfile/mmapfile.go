// Package mmapfile opens a file as a read-only region: memory-mapped where
// the platform allows it (unix), read through the open file elsewhere or
// when mapping fails. Checkpoint readers and the artifact use it, so weights
// are paged in by the OS instead of copied.
package mmapfile

import (
	"bytes"
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"io"
	"os"
)

// Region is an opened file.
type Region struct {
	// Data is the whole file when it is mapped, else nil. It is read-only
	// memory: writing to it faults. It is invalid after Close.
	Data []byte
	// Size is the file size in bytes.
	Size int64

	// HugePages tells that OpenHugePages found or made Data in huge pages:
	// the page cache's own 2 MiB folios mapped, or a private copy of the
	// file in memory advised for transparent huge pages (Copied).
	HugePages bool
	// Copied tells that Data is a private copy of the file, not a mapping.
	Copied bool
	// Refreshed tells that OpenWeights or OpenHugePages had the page
	// cache drop the file's small pages to read it back in huge folios
	// (no copy).
	Refreshed bool

	r     io.ReaderAt
	close func() error
}

// ReadAt reads from the region (the mapping or the file).
func (r *Region) ReadAt(p []byte, off int64) (int, error) { return r.r.ReadAt(p, off) }

// Close unmaps or closes the file.
func (r *Region) Close() error {
	if r.close == nil {
		return nil
	}
	err := r.close()
	r.close = nil
	return err
}

// Open opens path read-only, mapped where possible.
func Open(path string) (*Region, error) {
	f, size, err := openSized(path)
	if err != nil {
		return nil, err
	}
	if data, unmap, err := mapFile(f, size); err == nil {
		f.Close() // the mapping outlives the descriptor
		return &Region{Data: data, Size: size, r: bytes.NewReader(data), close: unmap}, nil
	}
	return &Region{Size: size, r: f, close: f.Close}, nil
}

// OpenWeights opens path read-only like Open, for a model whose weights
// are streamed once per token. On Linux with transparent huge pages
// available, when the file is at least minRefresh bytes, it samples the
// mapping: it touches refreshSamples huge pages spread over the file and
// counts those that came mapped whole. When some did and some did not,
// the file system keeps large folios but the page cache holds part of
// the file in 4 KiB pages (read back piece by piece after memory pressure
// evicted it), which it keeps until they leave the cache; OpenWeights
// then asks the kernel to drop the file's cached pages that no process
// maps and maps it again, so that the weights are read back from disk, as
// the first pass touches them, in 2 MiB folios. That costs the read of a
// cold start and no memory beyond the page cache; decode then takes 512
// times fewer TLB misses (OpenHugePages). When none came whole, the file
// system may keep no large folios, where dropping the cache would only
// make every open a cold one: the file is left as it is (OpenHugePages,
// asked for, tries anyway). The sample reads at most refreshSamples huge
// pages at open.
func OpenWeights(path string) (*Region, error) {
	r, err := Open(path)
	if err != nil || r.Data == nil || r.Size < minRefresh || !hugePagesAvailable() {
		return r, err
	}
	var sum byte
	pages := r.Size / hugePage
	for i := range int64(refreshSamples) {
		sum += r.Data[i*(pages-1)/(refreshSamples-1)*hugePage]
	}
	touchSink = sum
	if h := r.HugeBytes(); h == 0 || h >= refreshSamples*hugePage {
		return r, nil
	}
	return reopenDropped(r, path)
}

// reopenDropped closes r, asks the kernel to drop path's cached pages
// that no process maps, and opens path again (Refreshed): its pages are
// then read back from disk through the new, advised mapping.
func reopenDropped(r *Region, path string) (*Region, error) {
	r.Close()
	if f, _, err := openSized(path); err == nil {
		dropCached(f)
		f.Close()
	}
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	r.Refreshed = true
	return r, nil
}

// minRefresh is the smallest file OpenWeights samples: below it a token's
// TLB misses cost little. refreshSamples is how many huge pages it
// touches.
const (
	minRefresh     = 32 << 20
	refreshSamples = 8
)

// OpenHugePages opens path read-only like Open, and on Linux makes sure
// the data sits in huge pages. A model's decode streams every weight once
// per token; with 2 MiB pages it takes 512 times fewer TLB misses to do so
// (SmolLM2-135M shape, 4-bit, 1 thread: 40% faster decode on an AMD EPYC).
// Open already maps the file's huge folios where the page cache holds it
// in them (see mapFile); OpenHugePages faults the mapping in, and if less
// than 90% of it came in huge pages, it first asks the kernel to drop the
// file's cached pages that no process maps (POSIX_FADV_DONTNEED) and maps
// it again: a page cache that took the file in 4 KiB pages (copied in, or
// read back piece by piece after memory pressure evicted part of it)
// keeps them until they leave the cache, and read back from disk through
// the advised mapping the file comes in 2 MiB folios on file systems that
// keep large folios. That costs one read of the file and no memory beyond
// the page cache. If the share is still short, it reads the whole file
// into private memory advised for transparent huge pages instead. That
// copy costs a load that reads the whole file, and memory that the kernel
// cannot drop and read back as it can mapped file pages, so it is an
// option, not the default. Elsewhere, or when the copy fails, it is Open.
func OpenHugePages(path string) (*Region, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	mostlyHuge := func(r *Region) bool {
		if r.Data == nil || r.Size < hugePage {
			return false
		}
		touch(r.Data)
		return r.HugeBytes() >= r.Size/10*9
	}
	if mostlyHuge(r) {
		r.HugePages = true
		return r, nil
	}
	if r.Data != nil && r.Size >= hugePage {
		if r, err = reopenDropped(r, path); err != nil {
			return nil, err
		}
		if mostlyHuge(r) {
			r.HugePages = true
			return r, nil
		}
	}
	f, size, err := openSized(path)
	if err != nil {
		return r, nil
	}
	data, free, err := readHuge(f, size)
	f.Close()
	if err != nil {
		return r, nil
	}
	r.Close()
	return &Region{Data: data, Size: size, HugePages: true, Copied: true, r: bytes.NewReader(data), close: free}, nil
}

// touch reads a byte of every huge page of b, so that the kernel maps it.
func touch(b []byte) {
	var sum byte
	for i := 0; i < len(b); i += hugePage {
		sum += b[i]
	}
	touchSink = sum
}

// touchSink keeps touch's reads from being optimized away.
var touchSink byte

// HugeBytes returns how many bytes of the region the kernel maps with huge
// pages right now (Linux; 0 elsewhere or when not mapped). It counts the
// pages touched so far: after a decode has read every weight, it tells
// whether the weights streamed through 2 MiB pages or 4 KiB ones.
func (r *Region) HugeBytes() int64 {
	if r.Data == nil {
		return 0
	}
	return hugeMapped(r.Data)
}

// openSized opens path read-only and returns its size.
func openSized(path string) (*os.File, int64, error) {
	f, st, err := userfile.Open(path, userfile.Model)
	if err != nil {
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// errNotMappable is returned by mapFile for sizes a mapping cannot hold.
var errNotMappable = fmt.Errorf("file size not mappable")

// Release tells the OS that bytes [off, off+n) of the region will not be
// read again soon: the whole pages among them are dropped from this
// process's resident memory (the data stays in the file and the page
// cache, and a later read maps it back in). Streaming readers call it
// after converting a tensor, so that the mapped pages of a checkpoint do
// not add up to the model's size. It does nothing when the region is not
// mapped (nor on a copy: OpenHugePages), and ignores a range outside the
// file.
func (r *Region) Release(off, n int64) {
	if r.Data == nil || r.Copied || off < 0 || n <= 0 || off > int64(len(r.Data))-n {
		return
	}
	release(r.Data[off : off+n])
}

// HugePagesAvailable reports whether the kernel can back memory with
// transparent huge pages when asked (Linux in "always" or "madvise"
// mode), so that OpenHugePages can put a file in them.
func HugePagesAvailable() bool { return hugePagesAvailable() }
