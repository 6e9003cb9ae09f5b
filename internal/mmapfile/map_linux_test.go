//go:build linux

package mmapfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// writeChunked writes data to path in whole aligned 2 MiB writes, the way
// the artifact writer does, so that a file system with large folios can
// keep it in huge folios.
func writeChunked(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += hugePage {
		if _, err := f.Write(data[off:min(off+hugePage, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAlignsLargeFiles: a file of a huge page or more is mapped at a
// huge-page-aligned address (else its page cache's 2 MiB folios could not
// be mapped whole), reads back its bytes, and reports a huge-mapped share
// within the file; a smaller file maps as before.
func TestOpenAlignsLargeFiles(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{hugePage, 5<<20 + 123, 10000} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i*31 + i>>13)
		}
		path := filepath.Join(dir, "f")
		writeChunked(t, path, want)
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if r.Data == nil || !bytes.Equal(r.Data, want) {
			t.Fatalf("size %d: mapping differs from the file", size)
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(r.Data)))
		if size >= hugePage && addr%hugePage != 0 {
			t.Fatalf("size %d mapped at %#x, not aligned to a huge page", size, addr)
		}
		if h := r.HugeBytes(); h < 0 || h > int64(size) {
			t.Fatalf("size %d: %d bytes in huge pages", size, h)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenHugePagesUsesHugeFolios: where the page cache holds the file in
// huge folios (its mapping, touched, is at least 90% huge-mapped),
// OpenHugePages maps them rather than copying the file; where it does not,
// it copies into advised memory. Either way the bytes are the file's.
func TestOpenHugePagesUsesHugeFolios(t *testing.T) {
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i*7 + i>>17)
	}
	path := filepath.Join(t.TempDir(), "f")
	writeChunked(t, path, want)
	probe, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	touch(probe.Data)
	folios := probe.HugeBytes() >= probe.Size/10*9
	probe.Close()

	r, err := OpenHugePages(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.HugePages || folios && (r.Copied || r.Refreshed) || !folios && !r.Copied && !r.Refreshed {
		t.Fatalf("huge folios %v: HugePages %v, Copied %v, Refreshed %v", folios, r.HugePages, r.Copied, r.Refreshed)
	}
	if !bytes.Equal(r.Data, want) {
		t.Fatal("data differs from the file")
	}
	t.Logf("page cache in huge folios: %v; huge-mapped %d of %d bytes", folios, r.HugeBytes(), r.Size)
}

// TestOpenHugePagesRefreshesSmallPages: a file written 4 KiB at a time
// (and synced, so its cached pages are clean) may sit in the page cache
// in small folios. OpenHugePages then has the cache drop them and maps
// the file again, or copies it: whichever it did, the bytes are the
// file's, and a mapping it kept (not a copy) is at least 90% huge-mapped.
func TestOpenHugePagesRefreshesSmallPages(t *testing.T) {
	want := make([]byte, 6<<20+4096)
	for i := range want {
		want[i] = byte(i*13 + i>>15)
	}
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(want); off += 4096 {
		if _, err := f.Write(want[off:min(off+4096, len(want))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	probe, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	touch(probe.Data)
	before := probe.HugeBytes()
	probe.Close()

	r, err := OpenHugePages(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !bytes.Equal(r.Data, want) {
		t.Fatal("data differs from the file")
	}
	if !r.HugePages {
		t.Fatal("HugePages false")
	}
	if !r.Copied && r.HugeBytes() < r.Size/10*9 {
		t.Fatalf("kept the mapping with %d of %d bytes huge-mapped", r.HugeBytes(), r.Size)
	}
	t.Logf("huge-mapped before %d, after %d of %d bytes; refreshed %v, copied %v", before, r.HugeBytes(), r.Size, r.Refreshed, r.Copied)
}

// TestOpenWeightsRefreshesSmallPages: a 40 MiB file whose first half was
// written in 2 MiB pieces and second half 4 KiB at a time sits in the
// page cache partly in huge folios, partly in small ones. Where the file
// system keeps large folios (a file written in 2 MiB pieces maps huge),
// the default open of a model samples the mapping, has the cache drop the
// small pages, and the file then maps at least 90% huge once touched,
// with its bytes unchanged. A file all in huge folios, or all in small
// ones (which may be a file system without large folios), is left as is.
func TestOpenWeightsRefreshesSmallPages(t *testing.T) {
	if !hugePagesAvailable() {
		t.Log("transparent huge pages are off here: OpenWeights is Open")
	}
	dir := t.TempDir()
	want := make([]byte, 40<<20+123)
	for i := range want {
		want[i] = byte(i*29 + i>>13)
	}
	write := func(name string, piece func(off int) int) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(want); {
			end := min(off+piece(off), len(want))
			if _, err := f.Write(want[off:end]); err != nil {
				t.Fatal(err)
			}
			off = end
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return path
	}
	share := func(path string) int64 {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		touch(r.Data)
		return r.HugeBytes()
	}
	open := func(path string) *Region {
		r, err := OpenWeights(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Data, want) {
			t.Fatalf("%s: data differs from the file", path)
		}
		return r
	}
	big := write("big", func(int) int { return hugePage })
	folios := hugePagesAvailable() && share(big) >= int64(len(want))/10*9
	small := write("small", func(int) int { return 4096 })
	mixed := write("mixed", func(off int) int {
		if off < len(want)/2 {
			return hugePage
		}
		return 4096
	})
	for _, path := range []string{big, small} {
		before := share(path)
		r := open(path)
		if r.Refreshed && (before == 0 || before >= r.Size/10*9) {
			t.Fatalf("%s: refreshed with %d of %d bytes huge-mapped", path, before, r.Size)
		}
		r.Close()
	}
	before := share(mixed)
	r := open(mixed)
	defer r.Close()
	touch(r.Data)
	after := r.HugeBytes()
	t.Logf("huge folios here: %v; mixed file huge-mapped before %d, after %d of %d bytes; refreshed %v", folios, before, after, r.Size, r.Refreshed)
	if folios && before > 0 && before < r.Size/10*9 && (!r.Refreshed || after < r.Size/10*9) {
		t.Fatalf("small pages not refreshed: refreshed %v, %d of %d bytes huge-mapped", r.Refreshed, after, r.Size)
	}
}

func TestVMARange(t *testing.T) {
	for _, c := range []struct {
		line       string
		start, end uint64
		ok         bool
	}{
		{"7f2780a00000-7f2785c75000 r--s 00000000 fe:00 9994273   /tmp/m.aot", 0x7f2780a00000, 0x7f2785c75000, true},
		{"00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/dbus-daemon", 0x400000, 0x452000, true},
		{"Rss:               84436 kB", 0, 0, false},
		{"FilePmdMapped:     83968 kB", 0, 0, false},
		{"VmFlags: rd mr me ms sd", 0, 0, false},
		{"zz-10 r--p", 0, 0, false},
		{"", 0, 0, false},
	} {
		s, e, ok := vmaRange([]byte(c.line))
		if s != c.start || e != c.end || ok != c.ok {
			t.Errorf("%q: %x-%x %v, want %x-%x %v", c.line, s, e, ok, c.start, c.end, c.ok)
		}
	}
}
