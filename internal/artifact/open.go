package artifact

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// OpenOptions controls Open.
type OpenOptions struct {
	// Verify also checks the weights checksum, reading every weight byte.
	// Without it Open reads only the header and the small sections.
	Verify bool
	// HugePages makes sure the file sits in huge pages (Linux; see
	// mmapfile.OpenHugePages): its page cache's 2 MiB folios mapped, or
	// else a copy in memory advised for transparent huge pages.
	HugePages bool
}

// Open maps the artifact at path and validates it (see the package
// documentation for what every Open checks). Malformed files yield a
// *FormatError naming the section, newer format versions a *VersionError,
// and artifacts needing absent CPU features a *CPUFeatureError.
func Open(path string, opts OpenOptions) (*Artifact, error) {
	src, err := openSource(path, opts.HugePages)
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	a, err := open(src, path, opts)
	if err != nil {
		src.close()
		return nil, err
	}
	return a, nil
}

// OpenReader opens an artifact of size bytes read through r. Tensor and
// Blob return copies read on demand. Closing the Artifact does not close r.
func OpenReader(r io.ReaderAt, size int64, opts OpenOptions) (*Artifact, error) {
	return open(&source{r: r, size: size}, "", opts)
}

// open validates the artifact in src.
func open(src *source, file string, opts OpenOptions) (*Artifact, error) {
	size := src.size
	ferr := func(section, f string, args ...any) error { return formatErr(file, section, f, args...) }
	if size < int64(len(Magic)) {
		return nil, ferr("header", "truncated file: %d bytes, the header needs %d", size, HeaderSize)
	}
	hb, err := src.slice(0, min(size, HeaderSize))
	if err != nil {
		return nil, ferr("header", "%v", err)
	}
	if string(hb[:len(Magic)]) != Magic {
		return nil, ferr("header", "bad magic %q, not an aotlm artifact", hb[:len(Magic)])
	}
	if size < 12 {
		return nil, ferr("header", "truncated file: %d bytes, the header needs %d", size, HeaderSize)
	}
	switch v := binary.LittleEndian.Uint32(hb[8:]); {
	case v == 0:
		return nil, ferr("header", "format version 0 is invalid")
	case v > Version:
		return nil, &VersionError{File: file, Version: v, Supported: Version}
	}
	if size < HeaderSize {
		return nil, ferr("header", "truncated file: %d bytes, the header needs %d", size, HeaderSize)
	}
	h, err := decodeHeader(hb)
	if err != nil {
		return nil, ferr("header", "%v", err)
	}
	if h.fileSize != uint64(size) {
		if uint64(size) < h.fileSize {
			return nil, ferr("file", "truncated file: %d bytes, the header records %d", size, h.fileSize)
		}
		return nil, ferr("file", "%d bytes, but the header records %d (data appended?)", size, h.fileSize)
	}
	if err := checkFeatures(file, h.features); err != nil {
		return nil, err
	}
	secs, err := readTable(src, h)
	if err != nil {
		return nil, ferr("section table", "%v", err)
	}
	a := &Artifact{src: src, file: file, size: size, features: h.features, sections: secs,
		small: map[string][]byte{}, blobs: map[string]int{}}
	for i, s := range secs {
		switch s.Kind {
		case KindWeights:
			a.weights = s
			continue
		case KindManifest, KindTensorIndex:
		default:
			a.blobs[s.Name] = i
		}
		b, err := a.sectionBytes(s)
		if err != nil {
			return nil, err
		}
		a.small[s.Name] = b
	}
	a.manifest = a.small[ManifestName]
	if !isJSONObject(a.manifest) {
		return nil, ferr(ManifestName, "not a JSON object")
	}
	a.tensors, err = decodeIndex(a.small[TensorIndexName], a.weights.Size)
	if err != nil {
		return nil, ferr(TensorIndexName, "%v", err)
	}
	a.byName = make(map[string]int, len(a.tensors))
	for i, t := range a.tensors {
		a.byName[t.Name] = i
	}
	if opts.Verify {
		if err := a.verifyWeights(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// readTable reads, checksums and checks the section table: every section
// inside the file, aligned, not overlapping the header, the table or
// another section, uniquely named, with exactly one manifest, tensor index
// and weights section under their fixed names.
func readTable(src *source, h header) ([]Section, error) {
	size := src.size
	if h.count == 0 || h.count > maxSections {
		return nil, fmt.Errorf("section count %d not in 1..%d", h.count, maxSections)
	}
	tlen := int64(h.count) * EntrySize
	if h.tableOffset < HeaderSize || h.tableOffset%Align != 0 {
		return nil, fmt.Errorf("offset %d is not a multiple of %d past the header", h.tableOffset, Align)
	}
	if h.tableOffset > uint64(size) || tlen > size-int64(h.tableOffset) {
		return nil, fmt.Errorf("%d entries at offset %d run past the end of the %d-byte file", h.count, h.tableOffset, size)
	}
	toff := int64(h.tableOffset)
	tb, err := src.slice(toff, tlen)
	if err != nil {
		return nil, err
	}
	if got := checksum(tb); got != h.tableCRC {
		return nil, fmt.Errorf("checksum mismatch (stored %#08x, computed %#08x)", h.tableCRC, got)
	}
	secs := make([]Section, h.count)
	names := make(map[string]bool, h.count)
	fixed := map[Kind]string{KindManifest: ManifestName, KindTensorIndex: TensorIndexName, KindWeights: WeightsName}
	seen := map[Kind]bool{}
	for i := range secs {
		s, err := decodeEntry(tb[i*EntrySize:(i+1)*EntrySize], i)
		if err != nil {
			return nil, err
		}
		if s.Offset > size || s.Size > size-s.Offset {
			return nil, fmt.Errorf("section %q: bytes %d..%d+%d run past the end of the %d-byte file", s.Name, s.Offset, s.Offset, s.Size, size)
		}
		if names[s.Name] {
			return nil, fmt.Errorf("section %q: duplicate name", s.Name)
		}
		names[s.Name] = true
		if want, ok := fixed[s.Kind]; ok {
			if seen[s.Kind] {
				return nil, fmt.Errorf("section %q: second %v section", s.Name, s.Kind)
			}
			if s.Name != want {
				return nil, fmt.Errorf("section %q: a %v section must be named %q", s.Name, s.Kind, want)
			}
			seen[s.Kind] = true
		}
		secs[i] = s
	}
	for k, name := range fixed {
		if !seen[k] {
			return nil, fmt.Errorf("no %q section", name)
		}
	}
	// Every byte belongs to the header, a section, the table, or zero
	// padding shorter than the alignment of what follows it.
	all := append(slices.Clone(secs),
		Section{Name: "header", Offset: 0, Size: HeaderSize, Align: 1},
		Section{Name: "section table", Offset: toff, Size: tlen, Align: Align})
	all = slices.DeleteFunc(all, func(s Section) bool { return s.Size == 0 })
	slices.SortFunc(all, func(a, b Section) int { return cmp.Compare(a.Offset, b.Offset) })
	for i := 1; i < len(all); i++ {
		p, q := all[i-1], all[i]
		if p.end() > q.Offset {
			return nil, fmt.Errorf("section %q: bytes %d..%d overlap %q at %d..%d", q.Name, q.Offset, q.end(), p.Name, p.Offset, p.end())
		}
		if err := checkPadding(src, p.end(), q.Offset, q.Align, q.Name); err != nil {
			return nil, err
		}
	}
	if last := all[len(all)-1]; last.end() != size {
		return nil, fmt.Errorf("%d bytes after the last section %q", size-last.end(), last.Name)
	}
	return secs, nil
}

// checkPadding checks that the gap [from, to) before section name is zero
// bytes and shorter than its alignment.
func checkPadding(src *source, from, to, align int64, name string) error {
	if to-from >= align {
		return fmt.Errorf("section %q: %d-byte gap before it, more than alignment padding", name, to-from)
	}
	gap, err := src.slice(from, to-from)
	if err != nil {
		return err
	}
	for i, c := range gap {
		if c != 0 {
			return fmt.Errorf("section %q: padding byte %d before it is %#02x, not zero", name, from+int64(i), c)
		}
	}
	return nil
}

// isJSONObject reports whether b is exactly one JSON object.
func isJSONObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
