package artifact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"hash/crc32"
	"io"
	"unicode/utf8"
)

// Magic is the first 8 bytes of every artifact.
const Magic = "AOTLM\x00\r\n"

// Version is the artifact format version this package writes and the newest
// one it reads.
const Version = 1

// Sizes and limits of the fixed-size structures.
const (
	HeaderSize   = 128 // bytes of the header at offset 0
	EntrySize    = 96  // bytes of one section table entry
	MaxNameLen   = 64  // bytes of a section name
	Align        = 64  // alignment of sections and of tensors in the weights section
	maxSections  = 1 << 16
	maxAlignment = 1 << 16
)

// Fixed section names.
const (
	ManifestName    = "manifest"
	TensorIndexName = "tensor-index"
	WeightsName     = "weights"
)

// Kind is the type of a section.
type Kind uint32

// Section kinds. Kinds above KindBlob are opaque blobs to this package.
const (
	KindManifest    Kind = 1 // JSON object describing the model
	KindTensorIndex Kind = 2 // JSON list of tensors in the weights section
	KindWeights     Kind = 3 // tensor data
	KindPlan        Kind = 4 // an execution plan, opaque here
	KindTokenizer   Kind = 5 // a tokenizer file, opaque here
	KindBlob        Kind = 6 // any other named bytes
)

// String returns the kind's name ("manifest", "plan", ...).
func (k Kind) String() string {
	switch k {
	case KindManifest:
		return "manifest"
	case KindTensorIndex:
		return "tensor-index"
	case KindWeights:
		return "weights"
	case KindPlan:
		return "plan"
	case KindTokenizer:
		return "tokenizer"
	case KindBlob:
		return "blob"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// isBlob reports whether sections of kind k are named opaque bytes.
func (k Kind) isBlob() bool { return k >= KindPlan }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum returns the CRC-32C of b.
func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// header is the decoded fixed-size header.
type header struct {
	version     uint32
	headerSize  uint32
	flags       uint32
	count       uint32 // section count
	tableOffset uint64
	features    Features
	fileSize    uint64
	tableCRC    uint32
	headerCRC   uint32
}

// encode writes h into a HeaderSize buffer and fills in the header checksum.
func (h *header) encode() []byte {
	b := make([]byte, HeaderSize)
	copy(b, Magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], h.version)
	le.PutUint32(b[12:], h.headerSize)
	le.PutUint32(b[16:], h.flags)
	le.PutUint32(b[20:], h.count)
	le.PutUint64(b[24:], h.tableOffset)
	le.PutUint64(b[32:], uint64(h.features))
	le.PutUint64(b[40:], h.fileSize)
	le.PutUint32(b[48:], h.tableCRC)
	h.headerCRC = checksum(b)
	le.PutUint32(b[52:], h.headerCRC)
	return b
}

// decodeHeader parses and checks the header in b (at least HeaderSize
// bytes, magic and version already checked by the caller).
func decodeHeader(b []byte) (header, error) {
	le := binary.LittleEndian
	h := header{
		version:     le.Uint32(b[8:]),
		headerSize:  le.Uint32(b[12:]),
		flags:       le.Uint32(b[16:]),
		count:       le.Uint32(b[20:]),
		tableOffset: le.Uint64(b[24:]),
		features:    Features(le.Uint64(b[32:])),
		fileSize:    le.Uint64(b[40:]),
		tableCRC:    le.Uint32(b[48:]),
		headerCRC:   le.Uint32(b[52:]),
	}
	var c [HeaderSize]byte
	copy(c[:], b[:HeaderSize])
	clear(c[52:56])
	if got := checksum(c[:]); got != h.headerCRC {
		return h, fmt.Errorf("checksum mismatch (stored %#08x, computed %#08x)", h.headerCRC, got)
	}
	if h.headerSize != HeaderSize {
		return h, fmt.Errorf("header size %d, version %d has %d", h.headerSize, h.version, HeaderSize)
	}
	if h.flags != 0 {
		return h, fmt.Errorf("unknown flags %#x", h.flags)
	}
	for i := 56; i < HeaderSize; i++ {
		if b[i] != 0 {
			return h, fmt.Errorf("reserved byte %d is %#02x, not zero", i, b[i])
		}
	}
	return h, nil
}

// Section describes one section of an artifact.
type Section struct {
	Kind   Kind
	Name   string
	Offset int64  // from the start of the file
	Size   int64  // bytes
	Align  int64  // Offset is a multiple of Align
	CRC    uint32 // CRC-32C of the section bytes
}

// end returns the offset one past the section's last byte.
func (s Section) end() int64 { return s.Offset + s.Size }

// encodeEntry appends the table entry of s to b.
func encodeEntry(b []byte, s Section) []byte {
	var e [EntrySize]byte
	le := binary.LittleEndian
	le.PutUint32(e[0:], uint32(s.Kind))
	le.PutUint32(e[4:], uint32(s.Align))
	le.PutUint64(e[8:], uint64(s.Offset))
	le.PutUint64(e[16:], uint64(s.Size))
	le.PutUint32(e[24:], s.CRC)
	copy(e[32:], s.Name)
	return append(b, e[:]...)
}

// decodeEntry parses table entry i from e (EntrySize bytes) and checks the
// fields that do not depend on other entries or the file size. The error
// names the entry.
func decodeEntry(e []byte, i int) (Section, error) {
	le := binary.LittleEndian
	raw := e[32 : 32+MaxNameLen]
	name := raw
	if n := bytes.IndexByte(raw, 0); n >= 0 {
		name = raw[:n]
		if bytes.ContainsFunc(raw[n:], func(r rune) bool { return r != 0 }) {
			return Section{}, fmt.Errorf("entry %d: name has bytes after its terminating NUL", i)
		}
	}
	s := Section{
		Kind:  Kind(le.Uint32(e[0:])),
		Name:  string(name),
		Align: int64(le.Uint32(e[4:])),
		CRC:   le.Uint32(e[24:]),
	}
	if err := checkName(s.Name); err != nil {
		return s, fmt.Errorf("entry %d: %w", i, err)
	}
	off, size := le.Uint64(e[8:]), le.Uint64(e[16:])
	if off > 1<<62 || size > 1<<62 {
		return s, fmt.Errorf("section %q: offset %d or size %d out of range", s.Name, off, size)
	}
	s.Offset, s.Size = int64(off), int64(size)
	if s.Kind == 0 {
		return s, fmt.Errorf("section %q: kind 0 is invalid", s.Name)
	}
	if s.Align < Align || s.Align > maxAlignment || s.Align&(s.Align-1) != 0 {
		return s, fmt.Errorf("section %q: alignment %d is not a power of two in [%d, %d]", s.Name, s.Align, Align, maxAlignment)
	}
	if s.Offset%s.Align != 0 {
		return s, fmt.Errorf("section %q: offset %d is misaligned (alignment %d)", s.Name, s.Offset, s.Align)
	}
	if r := le.Uint32(e[28:]); r != 0 {
		return s, fmt.Errorf("section %q: reserved field is %#x, not zero", s.Name, r)
	}
	return s, nil
}

// checkName reports whether name is usable as a section name.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty section name")
	case len(name) > MaxNameLen:
		return fmt.Errorf("section name %q is longer than %d bytes", name, MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("section name %q is not UTF-8", name)
	case bytes.ContainsFunc([]byte(name), func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("section name %q has control characters", name)
	}
	return nil
}

// alignUp rounds n up to a multiple of a (a power of two).
func alignUp(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }

// IsArtifact reports whether the file at path starts with the artifact
// magic (it says nothing of the rest of the file).
func IsArtifact(path string) bool {
	f, _, err := userfile.Open(path, userfile.Model)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(Magic))
	n, _ := io.ReadFull(f, head)
	return n == len(head) && string(head) == Magic
}
