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
	"sort"

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
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr[metadataKey] = metadata
	}
	var off int64
	for i, t := range sorted {
		if t.Name == "" || t.Name == metadataKey {
			return fmt.Errorf("tensor name %q is reserved", t.Name)
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return fmt.Errorf("tensor %q given twice", t.Name)
		}
		size, err := checkTensor(t)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		shape := append([]int64{}, t.Shape...)
		hdr[t.Name] = headerEntry{DType: dtypeName(t.DType), Shape: shape, DataOffsets: [2]int64{off, off + size}}
		off += size
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("encoding header: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if _, err := w.Write(lenBuf[:]); err != nil {
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
