package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/aotlm/aotlm/internal/tensor"
)

// Tensor is one tensor to write.
type Tensor struct {
	Name string
	// DType is the stored type. Data is converted to F32, F16 or BF16
	// (round to nearest even); Raw may carry any type with a safetensors
	// name (F64, I8, U8, I16, I32, I64 as well).
	DType tensor.DType
	Shape []int64 // outermost first
	Data  []float32
	// Raw, when non-nil, is written as is (little-endian) instead of Data.
	Raw []byte
}

// Write writes tensors and metadata as a safetensors file at path. It writes
// a temporary file in the same folder and renames it over path, so path
// never holds a partial file. Tensors are stored in name order.
func Write(path string, tensors []Tensor, metadata map[string]string) (err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := Encode(bw, tensors, metadata); err != nil {
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	return nil
}

// headerEntry is the JSON form of one tensor entry.
type headerEntry struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Encode writes tensors and metadata in safetensors layout to w: names in
// sorted order, data packed without gaps, the header padded with spaces to
// a multiple of 8 bytes.
func Encode(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	sorted := append([]Tensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, t := range sorted {
		if _, err := checkTensor(t); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
	}
	js, _, err := encodeHeader(sorted, metadata)
	if err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, t := range sorted {
		if err := writeData(w, t); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// encodeHeader returns the length prefix and header of sorted tensors
// (their data is not looked at: the sizes follow from dtype and shape), and
// each tensor's data offset from the end of the header.
func encodeHeader(sorted []Tensor, metadata map[string]string) ([]byte, []int64, error) {
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr[metadataKey] = metadata
	}
	offs := make([]int64, len(sorted))
	var off int64
	for i, t := range sorted {
		if t.Name == "" || t.Name == metadataKey {
			return nil, nil, fmt.Errorf("tensor name %q is reserved", t.Name)
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, nil, fmt.Errorf("tensor %q given twice", t.Name)
		}
		if dtypeName(t.DType) == "" {
			return nil, nil, fmt.Errorf("tensor %q: dtype %v has no safetensors name", t.Name, t.DType)
		}
		n, err := tensor.NumElements(t.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		size, err := t.DType.ByteSize(n)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		shape := append([]int64{}, t.Shape...)
		hdr[t.Name] = headerEntry{DType: dtypeName(t.DType), Shape: shape, DataOffsets: [2]int64{off, off + size}}
		offs[i] = off
		off += size
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding header: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(js)), uint64(len(js)))
	return append(out, js...), offs, nil
}

// FileWriter writes a safetensors file whose tensors are known up front
// (names, dtypes and shapes) and whose data arrives one tensor at a time,
// in any order and from several goroutines, so that no more than the
// tensors being written need to be in memory. The file is a temporary one
// in the destination's folder until Commit renames it into place; its
// bytes are exactly what Write produces for the same tensors.
type FileWriter struct {
	path    string
	tmp     string // the temporary file
	f       *os.File
	base    int64           // file offset of the data
	index   map[string]int  // name -> position in specs
	specs   []Tensor        // sorted, without data
	offs    []int64         // data offsets from base
	mu      sync.Mutex      // guards written
	written map[string]bool // tensors whose data is in the file
	done    bool
}

// Create starts a safetensors file at path holding the tensors of specs
// (Name, DType and Shape; data is ignored) and metadata. The header is
// written now; WriteTensor supplies the data.
func Create(path string, specs []Tensor, metadata map[string]string) (*FileWriter, error) {
	sorted := make([]Tensor, len(specs))
	for i, t := range specs {
		sorted[i] = Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	js, offs, err := encodeHeader(sorted, metadata)
	if err != nil {
		return nil, fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	w := &FileWriter{path: path, tmp: f.Name(), f: f, base: int64(len(js)), index: map[string]int{}, specs: sorted, offs: offs,
		written: map[string]bool{}}
	for i, t := range sorted {
		w.index[t.Name] = i
	}
	if _, err := f.WriteAt(js, 0); err != nil {
		w.Abort()
		return nil, fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	return w, nil
}

// WriteTensor writes the data of t, one of the tensors given to Create
// with the same dtype and shape. It is safe for concurrent use.
func (w *FileWriter) WriteTensor(t Tensor) error {
	i, ok := w.index[t.Name]
	if !ok {
		return fmt.Errorf("safetensors: writing %s: tensor %q was not declared", w.path, t.Name)
	}
	spec := w.specs[i]
	if t.DType != spec.DType || !slices.Equal(t.Shape, spec.Shape) {
		return fmt.Errorf("safetensors: writing %s: tensor %q is %v %v, declared %v %v", w.path, t.Name, t.DType, t.Shape, spec.DType, spec.Shape)
	}
	if _, err := checkTensor(t); err != nil {
		return fmt.Errorf("safetensors: writing %s: tensor %q: %w", w.path, t.Name, err)
	}
	w.mu.Lock()
	if w.done || w.written[t.Name] {
		w.mu.Unlock()
		return fmt.Errorf("safetensors: writing %s: tensor %q written twice or after Commit", w.path, t.Name)
	}
	w.written[t.Name] = true
	w.mu.Unlock()
	bw := bufio.NewWriterSize(io.NewOffsetWriter(w.f, w.base+w.offs[i]), 1<<16)
	if err := writeData(bw, t); err != nil {
		return fmt.Errorf("safetensors: writing %s: tensor %q: %w", w.path, t.Name, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: writing %s: tensor %q: %w", w.path, t.Name, err)
	}
	return nil
}

// Commit checks that every tensor was written, syncs the file and renames
// it to the destination path. On error nothing is left at the path.
func (w *FileWriter) Commit() error {
	w.mu.Lock()
	missing := ""
	for _, t := range w.specs {
		if !w.written[t.Name] {
			missing = t.Name
			break
		}
	}
	w.mu.Unlock()
	if missing != "" {
		w.Abort()
		return fmt.Errorf("safetensors: writing %s: tensor %q has no data", w.path, missing)
	}
	err := w.f.Chmod(0o644)
	if err == nil {
		err = w.f.Sync()
	}
	if err == nil {
		err = w.f.Close()
		w.f = nil
	}
	if err == nil {
		err = os.Rename(w.tmp, w.path)
	}
	if err != nil {
		w.Abort()
		return fmt.Errorf("safetensors: writing %s: %w", w.path, err)
	}
	w.done = true
	return nil
}

// Abort removes the temporary file; it does nothing after Commit.
func (w *FileWriter) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	os.Remove(w.tmp)
}

// checkTensor validates t and returns its byte size.
func checkTensor(t Tensor) (int64, error) {
	n, err := tensor.NumElements(t.Shape)
	if err != nil {
		return 0, err
	}
	if t.Raw != nil {
		if dtypeName(t.DType) == "" {
			return 0, fmt.Errorf("dtype %v has no safetensors name", t.DType)
		}
		size, err := t.DType.ByteSize(n)
		if err != nil {
			return 0, err
		}
		if int64(len(t.Raw)) != size {
			return 0, fmt.Errorf("raw data is %d bytes, shape %v of %v needs %d", len(t.Raw), t.Shape, t.DType, size)
		}
		return size, nil
	}
	switch t.DType {
	case tensor.F32, tensor.F16, tensor.BF16:
	default:
		return 0, fmt.Errorf("float data cannot be stored as %v (want f32, f16 or bf16)", t.DType)
	}
	if int64(len(t.Data)) != n {
		return 0, fmt.Errorf("%d values for shape %v (%d elements)", len(t.Data), t.Shape, n)
	}
	return t.DType.ByteSize(n)
}

// writeData writes the stored bytes of a checked tensor.
func writeData(w io.Writer, t Tensor) error {
	if t.Raw != nil {
		_, err := w.Write(t.Raw)
		return err
	}
	const chunk = 4096
	width := 4
	if t.DType != tensor.F32 {
		width = 2
	}
	buf := make([]byte, 0, chunk*width)
	for start := 0; start < len(t.Data); start += chunk {
		buf = buf[:0]
		for _, v := range t.Data[start:min(start+chunk, len(t.Data))] {
			switch t.DType {
			case tensor.F32:
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			case tensor.F16:
				buf = binary.LittleEndian.AppendUint16(buf, tensor.F32ToF16(v))
			case tensor.BF16:
				buf = binary.LittleEndian.AppendUint16(buf, tensor.F32ToBF16(v))
			default:
				return errors.New("unchecked dtype")
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
