package pytorch

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"testing"
)

// zipEntry is one file of a test archive.
type zipEntry struct {
	name   string
	data   []byte
	deflat bool // compress instead of storing
}

// buildZip writes entries, in order, into a zip archive.
func buildZip(t testing.TB, entries []zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		m := zip.Store
		if e.deflat {
			m = zip.Deflate
		}
		f, err := w.CreateHeader(&zip.FileHeader{Name: e.name, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readEntries returns every entry of a real archive, uncompressed.
func readEntries(t testing.TB, b []byte) []zipEntry {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out []zipEntry
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		d, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, zipEntry{name: f.Name, data: d})
	}
	return out
}

// Hand-assembled protocol-2 pickle pieces, as torch.save writes them.

func pkStr(s string) []byte {
	b := []byte{'X', 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[1:], uint32(len(s)))
	return append(b, s...)
}

func pkInt(v int32) []byte {
	b := []byte{'J', 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[1:], uint32(v))
	return b
}

func pkInts(vs ...int32) []byte {
	b := []byte{'('}
	for _, v := range vs {
		b = append(b, pkInt(v)...)
	}
	return append(b, 't')
}

func pkGlobal(mod, name string) []byte { return []byte(fmt.Sprintf("c%s\n%s\n", mod, name)) }

// pkTensor is `name: _rebuild_tensor_v2(storage(class, key, numel), off, size, stride, False, OrderedDict())`.
func pkTensor(name, class, key string, numel, off int32, size, stride []int32) []byte {
	var b []byte
	b = append(b, pkStr(name)...)
	b = append(b, pkGlobal("torch._utils", "_rebuild_tensor_v2")...)
	b = append(b, '(', '(')
	b = append(b, pkStr("storage")...)
	b = append(b, pkGlobal("torch", class)...)
	b = append(b, pkStr(key)...)
	b = append(b, pkStr("cpu")...)
	b = append(b, pkInt(numel)...)
	b = append(b, 't', 'Q')
	b = append(b, pkInt(off)...)
	b = append(b, pkInts(size...)...)
	b = append(b, pkInts(stride...)...)
	b = append(b, 0x89)
	b = append(b, pkGlobal("collections", "OrderedDict")...)
	b = append(b, ')', 'R', 't', 'R')
	return b
}

// pkStateDict wraps SETITEMS bodies into an OrderedDict program.
func pkStateDict(items ...[]byte) []byte {
	b := []byte{0x80, 2}
	b = append(b, pkGlobal("collections", "OrderedDict")...)
	b = append(b, ')', 'R', '(')
	for _, it := range items {
		b = append(b, it...)
	}
	return append(b, 'u', '.')
}

// f32Bytes encodes values little-endian.
func f32Bytes(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
