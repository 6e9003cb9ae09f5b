package artifact

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"unsafe"
)

// checkSample checks that a holds exactly the content of s.
func checkSample(t *testing.T, a *Artifact, s sample, mapped bool) {
	t.Helper()
	var m sampleManifest
	if err := a.Manifest(&m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, s.manifest) {
		t.Errorf("manifest %+v, want %+v", m, s.manifest)
	}
	ts := a.Tensors()
	if len(ts) != len(s.tensors) {
		t.Fatalf("%d tensors, want %d", len(ts), len(s.tensors))
	}
	for i, want := range s.tensors {
		info, data, err := a.Tensor(want.name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != want.name || info.DType != want.dtype || !slices.Equal(info.Shape, want.shape) ||
			info.Layout != want.layout || info.Size != int64(len(want.data)) {
			t.Errorf("tensor %q: descriptor %+v, want %v %v %q size %d", want.name, info, want.dtype, want.shape, want.layout, len(want.data))
		}
		if !reflect.DeepEqual(info, ts[i]) {
			t.Errorf("tensor %d: Tensors() %+v != Tensor() %+v", i, ts[i], info)
		}
		if !bytes.Equal(data, want.data) {
			t.Errorf("tensor %q: data differs", want.name)
		}
		if abs := a.weights.Offset + info.Offset; abs%Align != 0 {
			t.Errorf("tensor %q at file offset %d, not %d-byte aligned", want.name, abs, Align)
		}
		if mapped && len(data) > 0 {
			if p := uintptr(unsafe.Pointer(&data[0])); p%Align != 0 {
				t.Errorf("tensor %q mapped at %#x, not %d-byte aligned", want.name, p, Align)
			}
		}
	}
	for _, want := range s.blobs {
		got, err := a.Blob(want.name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.data) {
			t.Errorf("blob %q: %d bytes differ from the %d written", want.name, len(got), len(want.data))
		}
	}
	if bs := a.Blobs(); len(bs) != len(s.blobs) {
		t.Errorf("%d blobs, want %d", len(bs), len(s.blobs))
	}
	if a.RequiredFeatures() != s.features {
		t.Errorf("features %v, want %v", a.RequiredFeatures(), s.features)
	}
	if err := a.Verify(); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	s := newSample(1)
	path := filepath.Join(t.TempDir(), "m.aot")
	s.write(t, path)
	for _, verify := range []bool{false, true} {
		a, err := Open(path, OpenOptions{Verify: verify})
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, a, s, a.src.data != nil)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Tensor("norm.weight"); err == nil {
			t.Error("Tensor after Close succeeded")
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := openBytes(b, true)
	if err != nil {
		t.Fatal(err)
	}
	checkSample(t, a, s, false)
	if a.Size() != int64(len(b)) {
		t.Errorf("Size %d, file %d", a.Size(), len(b))
	}
}

func TestNotFound(t *testing.T) {
	path, _ := sampleFile(t)
	a, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, _, err := a.Tensor("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Tensor(nope): %v, want ErrNotFound", err)
	}
	for _, name := range []string{"nope", ManifestName, TensorIndexName, WeightsName} {
		if _, err := a.Blob(name); !errors.Is(err, ErrNotFound) {
			t.Errorf("Blob(%q): %v, want ErrNotFound", name, err)
		}
	}
}

func TestEmptyArtifact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.aot")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	a, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if string(a.ManifestJSON()) != "{}" || len(a.Tensors()) != 0 || len(a.Blobs()) != 0 {
		t.Errorf("empty artifact: manifest %s, %d tensors, %d blobs", a.ManifestJSON(), len(a.Tensors()), len(a.Blobs()))
	}
}

// TestLayoutMatchesDoc reads a written file following only the byte layout
// in doc.go, with the standard library's CRC-32C.
func TestLayoutMatchesDoc(t *testing.T) {
	_, b := sampleFile(t)
	le := binary.LittleEndian
	crc := func(p []byte) uint32 { return crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) }
	if string(b[:8]) != "AOTLM\x00\r\n" || le.Uint32(b[8:]) != 1 || le.Uint32(b[12:]) != 128 || le.Uint32(b[16:]) != 0 {
		t.Fatalf("header start % x", b[:20])
	}
	if le.Uint64(b[40:]) != uint64(len(b)) {
		t.Errorf("file size field %d, file %d", le.Uint64(b[40:]), len(b))
	}
	h := slices.Clone(b[:128])
	clear(h[52:56])
	if crc(h) != le.Uint32(b[52:]) {
		t.Error("header checksum does not follow the documented rule")
	}
	n, toff := int(le.Uint32(b[20:])), int(le.Uint64(b[24:]))
	if toff%64 != 0 || toff+n*96 != len(b) || crc(b[toff:toff+n*96]) != le.Uint32(b[48:]) {
		t.Errorf("section table at %d (%d entries) in a %d-byte file, or its checksum, is off", toff, n, len(b))
	}
	kinds := map[string]uint32{}
	prevEnd := uint64(128)
	for i := range n {
		e := b[toff+96*i:]
		name := string(bytes.TrimRight(e[32:96], "\x00"))
		off, size := le.Uint64(e[8:]), le.Uint64(e[16:])
		kinds[name] = le.Uint32(e)
		if le.Uint32(e[4:]) != 64 || off%64 != 0 || off < prevEnd || off-prevEnd >= 64 {
			t.Errorf("section %q at %d after %d, alignment %d", name, off, prevEnd, le.Uint32(e[4:]))
		}
		if crc(b[off:off+size]) != le.Uint32(e[24:]) {
			t.Errorf("section %q: checksum does not match its bytes", name)
		}
		prevEnd = off + size
	}
	if kinds["weights"] != 3 || kinds["manifest"] != 1 || kinds["tensor-index"] != 2 || kinds["plan/ar32"] != 4 || kinds["tokenizer/tokenizer.json"] != 5 {
		t.Errorf("kinds %v", kinds)
	}
	if first := rawTable(b)[0]; first.name != "weights" || first.off != 128 {
		t.Errorf("first section %q at %d, want weights at 128", first.name, first.off)
	}
	man := entry(t, b, "manifest")
	var m map[string]any
	if err := json.Unmarshal(b[man.off:man.off+man.size], &m); err != nil || m["architecture"] != "llama" {
		t.Errorf("manifest section: %v %v", m, err)
	}
	idx := entry(t, b, "tensor-index")
	var ix struct {
		Tensors []struct {
			Name   string  `json:"name"`
			DType  string  `json:"dtype"`
			Shape  []int64 `json:"shape"`
			Offset int64   `json:"offset"`
			Size   int64   `json:"size"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal(b[idx.off:idx.off+idx.size], &ix); err != nil {
		t.Fatal(err)
	}
	want := newSample(1).tensors
	for i, e := range ix.Tensors {
		at := 128 + e.Offset
		if e.Name != want[i].name || e.DType != want[i].dtype.String() || !bytes.Equal(b[at:at+e.Size], want[i].data) {
			t.Errorf("index entry %d (%s %s at %d) does not locate the written bytes", i, e.Name, e.DType, e.Offset)
		}
	}
}

func TestSizeBreakdown(t *testing.T) {
	path, b := sampleFile(t)
	a, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sb := a.SizeBreakdown()
	var sum int64
	for _, v := range sb.Sections {
		sum += v
	}
	if sb.File != int64(len(b)) || sum != sb.File {
		t.Errorf("sections sum to %d, file %d (%d): %v", sum, sb.File, len(b), sb.Sections)
	}
	w := entry(t, b, "weights")
	var tsum int64
	for _, v := range sb.Tensors {
		tsum += v
	}
	if tsum != w.size || sb.Sections["weights"] != w.size {
		t.Errorf("tensor classes sum to %d, weights section %d: %v", tsum, w.size, sb.Tensors)
	}
	if sb.Tensors["i8/lpbq-b32-rowblock8"] != 300 || sb.TensorCount["f32"] != 2 || sb.Sections["plan"] != 265 {
		t.Errorf("breakdown %+v", sb)
	}
}
