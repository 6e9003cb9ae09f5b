package artifact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aotlm/aotlm/internal/tensor"
)

// Limits on tensor index entries.
const (
	maxTensorName = 1024
	maxLayoutLen  = 128
	maxRank       = 16
)

// TensorInfo describes one tensor stored in the weights section.
type TensorInfo struct {
	Name   string
	DType  tensor.DType
	Shape  []int64 // outermost dimension first
	Layout string  // "" for plain row-major, else the compiler's layout tag
	Offset int64   // from the start of the weights section, a multiple of Align
	Size   int64   // bytes
}

// indexEntry is one tensor in the JSON tensor index.
type indexEntry struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Layout string  `json:"layout,omitempty"`
	Offset int64   `json:"offset"`
	Size   int64   `json:"size"`
}

// indexFile is the JSON tensor index section.
type indexFile struct {
	Tensors []indexEntry `json:"tensors"`
}

// encodeIndex returns the JSON tensor index of ts.
func encodeIndex(ts []TensorInfo) ([]byte, error) {
	f := indexFile{Tensors: make([]indexEntry, len(ts))}
	for i, t := range ts {
		f.Tensors[i] = indexEntry{Name: t.Name, DType: t.DType.String(), Shape: t.Shape, Layout: t.Layout, Offset: t.Offset, Size: t.Size}
		if t.Shape == nil {
			f.Tensors[i].Shape = []int64{}
		}
	}
	return json.Marshal(f)
}

// parseDType returns the DType named s.
func parseDType(s string) (tensor.DType, bool) {
	for d := tensor.DType(1); d.Valid(); d++ {
		if d.String() == s {
			return d, true
		}
	}
	return tensor.Invalid, false
}

// decodeIndex parses the JSON tensor index b and checks every entry against
// a weights section of weightsSize bytes. Errors name the tensor at fault.
func decodeIndex(b []byte, weightsSize int64) ([]TensorInfo, error) {
	var f indexFile
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a JSON tensor index: %w", err)
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the JSON tensor index")
	}
	ts := make([]TensorInfo, len(f.Tensors))
	seen := make(map[string]bool, len(f.Tensors))
	for i, e := range f.Tensors {
		dt, ok := parseDType(e.DType)
		if !ok {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q", e.Name, e.DType)
		}
		t := TensorInfo{Name: e.Name, DType: dt, Shape: e.Shape, Layout: e.Layout, Offset: e.Offset, Size: e.Size}
		if err := checkTensor(t); err != nil {
			return nil, err
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("tensor %q: duplicate name", t.Name)
		}
		seen[t.Name] = true
		switch {
		case t.Offset < 0 || t.Offset%Align != 0:
			return nil, fmt.Errorf("tensor %q: offset %d is not a non-negative multiple of %d", t.Name, t.Offset, Align)
		case t.Offset > weightsSize || t.Size > weightsSize-t.Offset:
			return nil, fmt.Errorf("tensor %q: bytes %d..%d+%d lie outside the weights section (%d bytes)",
				t.Name, t.Offset, t.Offset, t.Size, weightsSize)
		}
		ts[i] = t
	}
	if err := checkOverlap(ts); err != nil {
		return nil, err
	}
	return ts, nil
}

// checkTensor checks the parts of t that do not depend on where it is
// stored: name, layout, shape and, for plain layout, the size. Errors name
// the tensor and the field.
func checkTensor(t TensorInfo) error {
	if t.Name == "" || len(t.Name) > maxTensorName || !utf8.ValidString(t.Name) {
		return fmt.Errorf("tensor %q: name must be 1..%d bytes of UTF-8", t.Name, maxTensorName)
	}
	if !t.DType.Valid() {
		return fmt.Errorf("tensor %q: invalid dtype %v", t.Name, t.DType)
	}
	if len(t.Layout) > maxLayoutLen || strings.ContainsFunc(t.Layout, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return fmt.Errorf("tensor %q: layout %q must be at most %d printable ASCII bytes without spaces", t.Name, t.Layout, maxLayoutLen)
	}
	if len(t.Shape) > maxRank {
		return fmt.Errorf("tensor %q: shape %v has more than %d dimensions", t.Name, t.Shape, maxRank)
	}
	n, err := tensor.NumElements(t.Shape)
	if err != nil {
		return fmt.Errorf("tensor %q: shape: %w", t.Name, err)
	}
	if t.Size < 0 {
		return fmt.Errorf("tensor %q: negative size %d", t.Name, t.Size)
	}
	if t.Layout == "" {
		want, err := t.DType.ByteSize(n)
		if err != nil {
			return fmt.Errorf("tensor %q: shape %v: %w", t.Name, t.Shape, err)
		}
		if t.Size != want {
			return fmt.Errorf("tensor %q: size %d, but shape %v of %v needs %d bytes", t.Name, t.Size, t.Shape, t.DType, want)
		}
	}
	return nil
}

// checkOverlap reports two non-empty tensors sharing bytes.
func checkOverlap(ts []TensorInfo) error {
	order := make([]int, 0, len(ts))
	for i, t := range ts {
		if t.Size > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ts[a].Offset, ts[b].Offset) })
	for k := 1; k < len(order); k++ {
		p, q := ts[order[k-1]], ts[order[k]]
		if p.Offset+p.Size > q.Offset {
			return fmt.Errorf("tensor %q: bytes %d..%d overlap tensor %q at %d..%d",
				q.Name, q.Offset, q.Offset+q.Size, p.Name, p.Offset, p.Offset+p.Size)
		}
	}
	return nil
}
