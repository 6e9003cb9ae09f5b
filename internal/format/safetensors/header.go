package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// formatName is the Format() of every checkpoint this package opens.
const formatName = "safetensors"

// MaxHeaderSize bounds the JSON header (100 MiB, the limit the reference
// implementation uses), so a corrupt length cannot force a huge allocation.
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header entry holding string metadata.
const metadataKey = "__metadata__"

// tensorEntry is one parsed and validated header entry.
type tensorEntry struct {
	info     format.TensorInfo // Offset is absolute in the file
	dtype    string            // safetensors dtype name
	readable bool
}

// header is the validated content of one file's header.
type header struct {
	tensors  []tensorEntry // sorted by offset (file order)
	index    map[string]int
	metadata map[string]string
	dataPos  int64 // absolute offset of the data buffer
}

// rawEntry mirrors a header entry; pointers detect missing fields.
type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func errorf(file, field, msg string, args ...any) *format.Error {
	return &format.Error{Format: formatName, File: file, Field: field, Msg: fmt.Sprintf(msg, args...)}
}

// readHeader reads and validates the header of a file of the given size.
func readHeader(r io.ReaderAt, size int64, file string) (*header, error) {
	var lenBuf [8]byte
	if size < 8 {
		return nil, errorf(file, "header length", "file is %d bytes, shorter than the 8-byte header length", size)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading header length: %w", file, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(size-8) {
		return nil, errorf(file, "header length", "header of %d bytes is larger than the %d bytes after the length", n, size-8)
	}
	if n > MaxHeaderSize {
		return nil, errorf(file, "header length", "header of %d bytes exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, 8); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading header: %w", file, err)
	}
	return parseHeader(buf, size, file)
}

// parseHeader validates the JSON header buf of a file of the given size.
func parseHeader(buf []byte, size int64, file string) (*header, error) {
	h := &header{dataPos: 8 + int64(len(buf)), index: map[string]int{}}
	dataLen := size - h.dataPos
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errorf(file, "header", "not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errorf(file, "header", "invalid JSON: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, errorf(file, "header", "invalid JSON key %v", tok)
		}
		if seen[name] {
			return nil, errorf(file, name, "duplicate entry in header")
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errorf(file, name, "invalid JSON: %v", err)
		}
		if name == metadataKey {
			if err := json.Unmarshal(raw, &h.metadata); err != nil {
				return nil, errorf(file, metadataKey, "must map strings to strings: %v", err)
			}
			continue
		}
		e, err := parseEntry(name, raw, dataLen, file)
		if err != nil {
			return nil, err
		}
		e.info.Offset += h.dataPos
		h.tensors = append(h.tensors, e)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, errorf(file, "header", "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errorf(file, "header", "trailing data after the JSON object")
	}
	sort.SliceStable(h.tensors, func(i, j int) bool {
		a, b := h.tensors[i].info, h.tensors[j].info
		if a.Offset != b.Offset {
			return a.Offset < b.Offset
		}
		return a.Name < b.Name
	})
	var prev *tensorEntry
	for i := range h.tensors {
		t := &h.tensors[i]
		h.index[t.info.Name] = i
		if t.info.Size == 0 {
			continue
		}
		if prev != nil && t.info.Offset < prev.info.Offset+prev.info.Size {
			return nil, errorf(file, t.info.Name, "data overlaps tensor %q", prev.info.Name)
		}
		prev = t
	}
	return h, nil
}

// parseEntry validates one tensor entry. The returned Offset is relative to
// the data buffer of dataLen bytes.
func parseEntry(name string, raw json.RawMessage, dataLen int64, file string) (tensorEntry, error) {
	var re rawEntry
	if err := json.Unmarshal(raw, &re); err != nil {
		return tensorEntry{}, errorf(file, name, "invalid entry: %v", err)
	}
	switch {
	case re.DType == nil:
		return tensorEntry{}, errorf(file, name, "missing dtype")
	case re.Shape == nil:
		return tensorEntry{}, errorf(file, name, "missing shape")
	case re.DataOffsets == nil:
		return tensorEntry{}, errorf(file, name, "missing data_offsets")
	}
	spec, ok := dtypes[*re.DType]
	if !ok {
		return tensorEntry{}, &format.UnsupportedError{Format: formatName, File: file,
			What: fmt.Sprintf("tensor %q: dtype %q", name, *re.DType)}
	}
	shape := *re.Shape
	numel, err := tensor.NumElements(shape)
	if err != nil {
		return tensorEntry{}, errorf(file, name, "shape: %v", err)
	}
	if numel > (1<<62)/spec.size {
		return tensorEntry{}, errorf(file, name, "shape %v of %s overflows", shape, *re.DType)
	}
	off := *re.DataOffsets
	if len(off) != 2 {
		return tensorEntry{}, errorf(file, name, "data_offsets has %d values, want 2", len(off))
	}
	begin, end := off[0], off[1]
	switch {
	case begin < 0 || end < 0:
		return tensorEntry{}, errorf(file, name, "negative data_offsets %v", off)
	case end < begin:
		return tensorEntry{}, errorf(file, name, "data_offsets end %d before begin %d", end, begin)
	case end > dataLen:
		return tensorEntry{}, errorf(file, name, "data_offsets end %d past the end of the %d-byte data buffer", end, dataLen)
	case end-begin != numel*spec.size:
		return tensorEntry{}, errorf(file, name, "data_offsets span %d bytes, shape %v of %s needs %d",
			end-begin, shape, *re.DType, numel*spec.size)
	}
	return tensorEntry{
		info: format.TensorInfo{Name: name, DType: spec.dtype, Shape: append([]int64(nil), shape...),
			Offset: begin, Size: end - begin},
		dtype:    *re.DType,
		readable: spec.readable,
	}, nil
}
