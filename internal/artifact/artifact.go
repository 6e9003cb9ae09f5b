package artifact

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Artifact is an opened, validated artifact. Its methods are safe for
// concurrent use until Close. Byte slices it returns from a mapped file are
// views of read-only memory: they must not be written to and are invalid
// after Close.
type Artifact struct {
	src      *source
	file     string
	size     int64
	features Features
	sections []Section // in table order
	weights  Section
	small    map[string][]byte // bytes of every section but weights, by name
	blobs    map[string]int    // blob name -> index in sections
	manifest []byte
	tensors  []TensorInfo // in index order
	byName   map[string]int
	closed   bool
}

// errArtifactClosed is returned by methods called after Close.
var errArtifactClosed = errors.New("artifact: use after Close")

// Close releases the mapping or file. Slices returned earlier become
// invalid. Calling Close twice is harmless.
func (a *Artifact) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	if err := a.src.close(); err != nil {
		return fmt.Errorf("artifact: closing %s: %w", a.file, err)
	}
	return nil
}

// HugePages reports whether OpenOptions.HugePages put the file in huge
// pages (Linux): its page cache's huge folios mapped, or a copy in memory
// advised for transparent huge pages.
func (a *Artifact) HugePages() bool { return a.src.region != nil && a.src.region.HugePages }

// HugeBytes returns how many bytes of the file the kernel maps with huge
// pages now, among the pages touched so far (mmapfile.Region.HugeBytes);
// 0 when the file is not mapped.
func (a *Artifact) HugeBytes() int64 {
	if a.src.region == nil {
		return 0
	}
	return a.src.region.HugeBytes()
}

// Size returns the file size in bytes.
func (a *Artifact) Size() int64 { return a.size }

// RequiredFeatures returns the CPU features the artifact was compiled for.
func (a *Artifact) RequiredFeatures() Features { return a.features }

// Sections returns the section table in file order.
func (a *Artifact) Sections() []Section { return slices.Clone(a.sections) }

// ManifestJSON returns a copy of the manifest's JSON text.
func (a *Artifact) ManifestJSON() json.RawMessage { return slices.Clone(a.manifest) }

// Manifest unmarshals the manifest into v, as json.Unmarshal does.
func (a *Artifact) Manifest(v any) error {
	if err := json.Unmarshal(a.manifest, v); err != nil {
		return fmt.Errorf("artifact: manifest: %w", err)
	}
	return nil
}

// Tensors returns the descriptors of all tensors in index order.
func (a *Artifact) Tensors() []TensorInfo {
	ts := slices.Clone(a.tensors)
	for i := range ts {
		ts[i].Shape = slices.Clone(ts[i].Shape)
	}
	return ts
}

// Tensor returns the descriptor and bytes of the named tensor. From a
// mapped file the bytes are a view of the mapping (no copy), 64-byte
// aligned in the file; otherwise they are read into a new slice. A missing
// name yields an error wrapping ErrNotFound.
func (a *Artifact) Tensor(name string) (TensorInfo, []byte, error) {
	if a.closed {
		return TensorInfo{}, nil, errArtifactClosed
	}
	i, ok := a.byName[name]
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("artifact: tensor %q: %w", name, ErrNotFound)
	}
	t := a.tensors[i]
	t.Shape = slices.Clone(t.Shape)
	b, err := a.src.slice(a.weights.Offset+t.Offset, t.Size)
	if err != nil {
		return t, nil, fmt.Errorf("artifact: tensor %q: %w", name, err)
	}
	return t, b, nil
}

// Blob returns the bytes of the named blob section (a plan, a tokenizer
// file, ...). A missing name yields an error wrapping ErrNotFound.
func (a *Artifact) Blob(name string) ([]byte, error) {
	if a.closed {
		return nil, errArtifactClosed
	}
	if _, ok := a.blobs[name]; !ok {
		return nil, fmt.Errorf("artifact: blob %q: %w", name, ErrNotFound)
	}
	return a.small[name], nil
}

// Blobs returns the blob sections in file order.
func (a *Artifact) Blobs() []Section {
	var bs []Section
	for _, s := range a.sections {
		if s.Kind.isBlob() {
			bs = append(bs, s)
		}
	}
	return bs
}

// sectionBytes reads section s and checks its checksum.
func (a *Artifact) sectionBytes(s Section) ([]byte, error) {
	b, err := a.src.slice(s.Offset, s.Size)
	if err != nil {
		return nil, formatErr(a.file, s.Name, "%v", err)
	}
	if got := checksum(b); got != s.CRC {
		return nil, formatErr(a.file, s.Name, "checksum mismatch (stored %#08x, computed %#08x)", s.CRC, got)
	}
	return b, nil
}

// verifyWeights checks the weights section's checksum.
func (a *Artifact) verifyWeights() error {
	got, err := a.src.crc(a.weights.Offset, a.weights.Size)
	if err != nil {
		return formatErr(a.file, WeightsName, "%v", err)
	}
	if got != a.weights.CRC {
		return formatErr(a.file, WeightsName, "checksum mismatch (stored %#08x, computed %#08x)", a.weights.CRC, got)
	}
	return nil
}

// Verify re-reads every section, weights included, and checks its
// checksum. It returns a *FormatError naming the first corrupt section.
func (a *Artifact) Verify() error {
	if a.closed {
		return errArtifactClosed
	}
	for _, s := range a.sections {
		if s.Kind == KindWeights {
			continue
		}
		if _, err := a.sectionBytes(s); err != nil {
			return err
		}
	}
	return a.verifyWeights()
}

// SizeBreakdown is where an artifact's bytes go, for inspection.
type SizeBreakdown struct {
	File int64 `json:"file"`
	// Sections maps a section kind ("weights", "manifest", "plan", ...) to
	// its bytes; "header" and "section-table" count the fixed structures
	// and "padding" the alignment gaps between sections.
	Sections map[string]int64 `json:"sections"`
	// Tensors maps a tensor class, the dtype or "dtype/layout" ("f32",
	// "i8/lpbq-b32-rowblock8"), to its bytes; TensorCount to its tensors.
	// Alignment gaps between tensors count as "padding".
	Tensors     map[string]int64 `json:"tensors"`
	TensorCount map[string]int   `json:"tensor_count"`
}

// SizeBreakdown returns the artifact's bytes per section kind and per
// tensor class.
func (a *Artifact) SizeBreakdown() SizeBreakdown {
	b := SizeBreakdown{
		File:        a.size,
		Sections:    map[string]int64{"header": HeaderSize, "section-table": int64(len(a.sections)) * EntrySize},
		Tensors:     map[string]int64{},
		TensorCount: map[string]int{},
	}
	used := int64(HeaderSize) + int64(len(a.sections))*EntrySize
	for _, s := range a.sections {
		b.Sections[s.Kind.String()] += s.Size
		used += s.Size
	}
	b.Sections["padding"] = a.size - used
	var tensorBytes int64
	for _, t := range a.tensors {
		class := t.DType.String()
		if t.Layout != "" {
			class += "/" + t.Layout
		}
		b.Tensors[class] += t.Size
		b.TensorCount[class]++
		tensorBytes += t.Size
	}
	b.Tensors["padding"] = a.weights.Size - tensorBytes
	return b
}
