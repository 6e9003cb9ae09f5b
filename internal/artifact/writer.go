package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/tensor"
)

// Writer builds an artifact in a temporary file next to its destination and
// renames it into place on Commit, so a reader never sees a partial file.
// Tensor data is streamed to disk as it is added; the manifest and blobs are
// kept in memory until Commit. A Writer is not safe for concurrent use.
//
// After a write error every method returns that error and the Writer can
// only be aborted. The usual pattern is:
//
//	w, err := artifact.Create(path)
//	if err != nil { ... }
//	defer w.Abort() // no-op after a successful Commit
//	... w.AddTensor(...), w.AddBlob(...), w.SetManifest(...)
//	return w.Commit()
type Writer struct {
	path string // destination
	tmp  string // temporary file in the same folder
	f    *os.File
	bw   *chunkWriter
	off  int64 // bytes written so far

	weightsCRC uint32
	tensors    []TensorInfo
	names      map[string]bool // tensor names
	blobs      []blob
	blobNames  map[string]bool
	manifest   []byte
	features   Features

	err     error  // sticky write error
	done    bool   // committed or aborted
	untrack func() // stops the interrupt handler from removing tmp

	// Check, when set, is called by Commit with the path of the complete
	// temporary file before it is renamed into place; an error aborts the
	// commit and nothing is left at the destination.
	Check func(tmpPath string) error
}

// blob is a named section waiting for Commit.
type blob struct {
	kind Kind
	name string
	data []byte
}

// errClosed is returned by a Writer after Commit or Abort.
var errClosed = errors.New("artifact: writer already committed or aborted")

// Create starts an artifact that Commit will place at path. The data goes to
// a temporary file in path's folder until then.
func Create(path string) (*Writer, error) {
	f, err := output.CreateTemp(path)
	if err != nil {
		return nil, fmt.Errorf("artifact: creating %s: %w", path, err)
	}
	w := &Writer{
		path:      path,
		tmp:       f.Name(),
		untrack:   output.Track(f.Name()),
		f:         f,
		bw:        newChunkWriter(f),
		names:     map[string]bool{},
		blobNames: map[string]bool{ManifestName: true, TensorIndexName: true, WeightsName: true},
	}
	// The header is written last, once every offset is known.
	if err := w.write(make([]byte, HeaderSize)); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// check returns the error that stops the Writer from accepting more input.
func (w *Writer) check() error {
	if w.done {
		return errClosed
	}
	return w.err
}

// write appends p to the file, recording the first error.
func (w *Writer) write(p []byte) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.bw.Write(p)
	w.off += int64(n)
	if err != nil {
		w.err = fmt.Errorf("artifact: writing %s: %w", w.tmp, err)
	}
	return w.err
}

// pad writes zeros up to the next multiple of Align and returns them.
func (w *Writer) pad() ([]byte, error) {
	z := make([]byte, alignUp(w.off, Align)-w.off)
	return z, w.write(z)
}

// weightsWriter writes tensor data, folding it into the weights checksum.
type weightsWriter struct{ w *Writer }

func (ww weightsWriter) Write(p []byte) (int, error) {
	if err := ww.w.write(p); err != nil {
		return 0, err
	}
	ww.w.weightsCRC = crc32.Update(ww.w.weightsCRC, castagnoli, p)
	return len(p), nil
}

// SetRequiredFeatures records the CPU features the artifact's kernels
// execute; Open refuses the artifact on a machine lacking any of them.
func (w *Writer) SetRequiredFeatures(f Features) error {
	if err := w.check(); err != nil {
		return err
	}
	if r := f &^ knownFeatures; r != 0 {
		return fmt.Errorf("artifact: required features: reserved bits %v", r)
	}
	w.features = f
	return nil
}

// SetManifest stores v, marshalled to JSON, as the manifest. v must marshal
// to a JSON object. Without a call the manifest is {}.
func (w *Writer) SetManifest(v any) error {
	if err := w.check(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("artifact: manifest: %w", err)
	}
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("artifact: manifest: %T is not a JSON object", v)
	}
	w.manifest = b
	return nil
}

// AddTensor appends a tensor whose bytes are in data. layout is "" for
// plain row-major data of dtype and shape (then len(data) must match), or
// a layout tag naming a repacked form.
func (w *Writer) AddTensor(name string, dtype tensor.DType, shape []int64, layout string, data []byte) error {
	return w.AddTensorFrom(name, dtype, shape, layout, int64(len(data)), bytes.NewReader(data))
}

// AddTensorFrom is AddTensor streaming exactly size bytes from r, so that
// weights larger than memory pass through once.
func (w *Writer) AddTensorFrom(name string, dtype tensor.DType, shape []int64, layout string, size int64, r io.Reader) error {
	if err := w.check(); err != nil {
		return err
	}
	rel := alignUp(w.off, Align) - HeaderSize
	t := TensorInfo{Name: name, DType: dtype, Shape: slices.Clone(shape), Layout: layout, Offset: rel, Size: size}
	if err := checkTensor(t); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	if w.names[name] {
		return fmt.Errorf("artifact: tensor %q: duplicate name", name)
	}
	z, err := w.pad()
	if err != nil {
		return err
	}
	w.weightsCRC = crc32.Update(w.weightsCRC, castagnoli, z)
	n, err := io.CopyN(weightsWriter{w}, r, size)
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("artifact: tensor %q: read %d of %d bytes: %w", name, n, size, err)
		}
		return w.err
	}
	w.names[name] = true
	w.tensors = append(w.tensors, t)
	return nil
}

// AddBlob stores data as a section of the given kind (KindPlan,
// KindTokenizer, KindBlob or a larger custom kind) under a unique name of
// at most MaxNameLen bytes, such as "plan/ar32" or "tokenizer/tokenizer.json".
// data is copied.
func (w *Writer) AddBlob(kind Kind, name string, data []byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if !kind.isBlob() {
		return fmt.Errorf("artifact: blob %q: kind %v is not a blob kind", name, kind)
	}
	if err := checkName(name); err != nil {
		return fmt.Errorf("artifact: blob: %w", err)
	}
	if w.blobNames[name] {
		return fmt.Errorf("artifact: blob %q: duplicate section name", name)
	}
	w.blobNames[name] = true
	w.blobs = append(w.blobs, blob{kind, name, slices.Clone(data)})
	return nil
}

// Commit writes the small sections, the section table and the header,
// syncs the file and renames it to the destination path. On any error the
// temporary file is removed and nothing is left at the path.
func (w *Writer) Commit() error {
	if err := w.check(); err != nil {
		w.Abort()
		return err
	}
	err := w.finish()
	if err != nil {
		w.Abort()
		return err
	}
	w.done = true
	return nil
}

// finish does Commit's work; the caller cleans up on error.
func (w *Writer) finish() error {
	secs := []Section{{Kind: KindWeights, Name: WeightsName, Offset: HeaderSize, Size: w.off - HeaderSize, Align: Align, CRC: w.weightsCRC}}
	add := func(kind Kind, name string, data []byte) error {
		if _, err := w.pad(); err != nil {
			return err
		}
		secs = append(secs, Section{Kind: kind, Name: name, Offset: w.off, Size: int64(len(data)), Align: Align, CRC: checksum(data)})
		return w.write(data)
	}
	for _, b := range w.blobs {
		if err := add(b.kind, b.name, b.data); err != nil {
			return err
		}
	}
	manifest := w.manifest
	if manifest == nil {
		manifest = []byte("{}")
	}
	if err := add(KindManifest, ManifestName, manifest); err != nil {
		return err
	}
	index, err := encodeIndex(w.tensors)
	if err != nil {
		return fmt.Errorf("artifact: tensor index: %w", err)
	}
	if err := add(KindTensorIndex, TensorIndexName, index); err != nil {
		return err
	}
	if _, err := w.pad(); err != nil {
		return err
	}
	h := header{version: Version, headerSize: HeaderSize, count: uint32(len(secs)), tableOffset: uint64(w.off), features: w.features}
	var table []byte
	for _, s := range secs {
		table = encodeEntry(table, s)
	}
	h.tableCRC = checksum(table)
	if err := w.write(table); err != nil {
		return err
	}
	h.fileSize = uint64(w.off)
	if err := w.bw.flush(); err != nil {
		return fmt.Errorf("artifact: writing %s: %w", w.tmp, err)
	}
	if _, err := w.f.WriteAt(h.encode(), 0); err != nil {
		return fmt.Errorf("artifact: writing header of %s: %w", w.tmp, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("artifact: syncing %s: %w", w.tmp, err)
	}
	if err := w.f.Chmod(0o644); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	err = w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("artifact: closing %s: %w", w.tmp, err)
	}
	if w.Check != nil {
		if err := w.Check(w.tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(w.tmp, w.path); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	w.untrack()
	// The artifact is complete at its path now; making the rename itself
	// durable is best effort (some file systems cannot sync a folder).
	_ = syncDir(filepath.Dir(w.path))
	return nil
}

// Abort discards the artifact: the temporary file is closed and removed and
// nothing is written at the destination. It is a no-op after Commit or a
// previous Abort.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	var err error
	if w.f != nil {
		err = w.f.Close()
		w.f = nil
	}
	if rerr := os.Remove(w.tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	w.untrack()
	if err != nil {
		return fmt.Errorf("artifact: discarding %s: %w", w.tmp, err)
	}
	return nil
}

// writeChunk is the size and alignment of the writes that make an
// artifact: 2 MiB, a transparent huge page. On file systems whose page
// cache keeps large folios (ext4, xfs and others on recent Linux), a write
// of a whole aligned 2 MiB leaves the data in one 2 MiB folio, which a
// huge-page-aligned mapping (mmapfile) then maps with a single page table
// entry: the freshly compiled model decodes through huge pages without
// being read back from disk. Smaller writes leave 4 KiB pages.
const writeChunk = 2 << 20

// chunkWriter buffers a file written from offset 0 and writes it out in
// whole writeChunk pieces at multiples of writeChunk (and the rest by
// flush). Unlike bufio.Writer it never passes a large write through
// unaligned.
type chunkWriter struct {
	w   io.Writer
	buf []byte
}

// newChunkWriter returns a chunkWriter over w, which must start at offset 0.
func newChunkWriter(w io.Writer) *chunkWriter {
	return &chunkWriter{w: w, buf: make([]byte, 0, writeChunk)}
}

// Write copies p into the buffer, writing out every chunk it fills.
func (c *chunkWriter) Write(p []byte) (int, error) {
	done := 0
	for len(p) > 0 {
		n := copy(c.buf[len(c.buf):cap(c.buf)], p)
		c.buf = c.buf[:len(c.buf)+n]
		p = p[n:]
		done += n
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

// flush writes out what the buffer holds.
func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.w.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}
