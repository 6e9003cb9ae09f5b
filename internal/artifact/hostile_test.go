package artifact

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// craft lays out an artifact from raw section contents following doc.go,
// independently of Writer: header, weights, manifest, tensor index, then
// the given extra sections, then the table. Checksums are correct.
func craft(weights []byte, manifest, index string, extra ...blob) []byte {
	b := make([]byte, HeaderSize)
	var table []byte
	add := func(k Kind, name string, data []byte) {
		for len(b)%Align != 0 {
			b = append(b, 0)
		}
		table = encodeEntry(table, Section{Kind: k, Name: name, Offset: int64(len(b)), Size: int64(len(data)), Align: Align, CRC: checksum(data)})
		b = append(b, data...)
	}
	add(KindWeights, WeightsName, weights)
	add(KindManifest, ManifestName, []byte(manifest))
	add(KindTensorIndex, TensorIndexName, []byte(index))
	for _, x := range extra {
		add(x.kind, x.name, x.data)
	}
	for len(b)%Align != 0 {
		b = append(b, 0)
	}
	h := header{version: Version, headerSize: HeaderSize, count: uint32(len(table) / EntrySize),
		tableOffset: uint64(len(b)), tableCRC: checksum(table), fileSize: uint64(len(b) + len(table))}
	b = append(b, table...)
	copy(b, h.encode())
	return b
}

func TestCraftOpens(t *testing.T) {
	b := craft(make([]byte, 64), `{"a":1}`, `{"tensors":[{"name":"w","dtype":"f32","shape":[4,4],"offset":0,"size":64}]}`,
		blob{Kind(99), "future-kind", []byte("x")})
	a, err := openBytes(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Blob("future-kind"); err != nil || string(got) != "x" {
		t.Errorf("opaque kind 99 blob: %q %v", got, err)
	}
}

// TestHostileIndex feeds tensor indexes that must be refused, naming the
// tensor-index section and the field at fault.
func TestHostileIndex(t *testing.T) {
	for _, tc := range []struct{ name, index, want string }{
		{"not JSON", `{"tensors":[`, "not a JSON tensor index"},
		{"trailing data", `{"tensors":[]} {}`, "trailing data"},
		{"unknown dtype", `{"tensors":[{"name":"w","dtype":"f8","shape":[4],"offset":0,"size":4}]}`, `unknown dtype "f8"`},
		{"outside weights", `{"tensors":[{"name":"w","dtype":"f32","shape":[48],"offset":0,"size":192}]}`, "outside the weights section"},
		{"offset past weights", `{"tensors":[{"name":"w","dtype":"u8","shape":[1],"offset":128,"size":1}]}`, "outside the weights section"},
		{"size overflow", `{"tensors":[{"name":"w","dtype":"u8","shape":[1],"layout":"x","offset":64,"size":9223372036854775807}]}`, "outside the weights section"},
		{"negative offset", `{"tensors":[{"name":"w","dtype":"u8","shape":[1],"offset":-64,"size":1}]}`, "offset -64"},
		{"misaligned offset", `{"tensors":[{"name":"w","dtype":"u8","shape":[1],"offset":3,"size":1}]}`, "offset 3"},
		{"duplicate", `{"tensors":[{"name":"w","dtype":"u8","shape":[1],"offset":0,"size":1},{"name":"w","dtype":"u8","shape":[1],"offset":64,"size":1}]}`, "duplicate name"},
		{"overlap", `{"tensors":[{"name":"a","dtype":"u8","shape":[1],"layout":"x","offset":0,"size":100},{"name":"b","dtype":"u8","shape":[1],"offset":64,"size":1}]}`, "overlap"},
		{"overflowing shape", `{"tensors":[{"name":"w","dtype":"f32","shape":[4294967296,4294967296,16],"offset":0,"size":0}]}`, "overflows"},
		{"negative dim", `{"tensors":[{"name":"w","dtype":"f32","shape":[-1],"offset":0,"size":0}]}`, "negative dimension"},
		{"size mismatch", `{"tensors":[{"name":"w","dtype":"f32","shape":[3],"offset":0,"size":8}]}`, "needs 12 bytes"},
		{"partial block", `{"tensors":[{"name":"w","dtype":"q4_0","shape":[31],"offset":0,"size":18}]}`, "whole number"},
		{"negative size", `{"tensors":[{"name":"w","dtype":"u8","shape":[1],"layout":"x","offset":0,"size":-1}]}`, "negative size"},
		{"empty name", `{"tensors":[{"name":"","dtype":"u8","shape":[1],"offset":0,"size":1}]}`, "name must be"},
		{"bad layout", `{"tensors":[{"name":"w","dtype":"u8","shape":[1],"layout":"a b","offset":0,"size":1}]}`, "layout"},
		{"rank", `{"tensors":[{"name":"w","dtype":"u8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"offset":0,"size":1}]}`, "dimensions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openBytes(craft(make([]byte, 128), `{}`, tc.index), false)
			wantFormatError(t, err, TensorIndexName, tc.want)
		})
	}
}

func TestHostileManifest(t *testing.T) {
	for _, m := range []string{``, `{`, `[1,2]`, `"s"`, `{"a":1} x`, `null`} {
		_, err := openBytes(craft(nil, m, `{"tensors":[]}`), false)
		wantFormatError(t, err, ManifestName, "not a JSON object")
	}
}

// TestHostileTable edits section table and header fields of a valid file,
// reseals the checksums and checks the error names what is wrong.
func TestHostileTable(t *testing.T) {
	_, b := sampleFile(t)
	le := binary.LittleEndian
	man, w, idx := entry(t, b, ManifestName), entry(t, b, WeightsName), entry(t, b, TensorIndexName)
	plan := entry(t, b, "plan/ar1")
	for _, tc := range []struct {
		name    string
		edit    func(c []byte)
		section string
		want    []string
	}{
		{"section past end", func(c []byte) { le.PutUint64(c[man.at+16:], 1<<40) }, "section table", []string{`"manifest"`, "past the end"}},
		{"offset past end", func(c []byte) { le.PutUint64(c[man.at+8:], 1<<40) }, "section table", []string{`"manifest"`, "past the end"}},
		{"huge offset", func(c []byte) { le.PutUint64(c[man.at+8:], 1<<63) }, "section table", []string{`"manifest"`, "out of range"}},
		{"overlap", func(c []byte) { le.PutUint64(c[man.at+8:], uint64(w.off)) }, "section table", []string{"overlap"}},
		{"overlap table", func(c []byte) { le.PutUint64(c[idx.at+16:], uint64(idx.size+64)) }, "section table", []string{"overlap"}},
		{"misaligned", func(c []byte) { le.PutUint64(c[man.at+8:], uint64(man.off+8)) }, "section table", []string{`"manifest"`, "misaligned"}},
		{"bad alignment", func(c []byte) { le.PutUint32(c[man.at+4:], 48) }, "section table", []string{"alignment 48"}},
		{"huge alignment", func(c []byte) { le.PutUint32(c[man.at+4:], 1<<20) }, "section table", []string{"alignment"}},
		{"duplicate name", func(c []byte) { copy(c[plan.at+32:], "plan/ar32") }, "section table", []string{"duplicate"}},
		{"name after NUL", func(c []byte) { c[plan.at+32+60] = 'x' }, "section table", []string{"after its terminating NUL"}},
		{"empty name", func(c []byte) { clear(c[plan.at+32 : plan.at+96]) }, "section table", []string{"empty section name"}},
		{"control name", func(c []byte) { c[plan.at+33] = '\n' }, "section table", []string{"control"}},
		{"kind 0", func(c []byte) { le.PutUint32(c[plan.at:], 0) }, "section table", []string{"kind 0"}},
		{"reserved entry field", func(c []byte) { le.PutUint32(c[plan.at+28:], 1) }, "section table", []string{"reserved"}},
		{"manifest kind misnamed", func(c []byte) { le.PutUint32(c[plan.at:], uint32(KindManifest)) }, "section table", []string{`"plan/ar1"`, "must be named"}},
		{"two manifests", func(c []byte) {
			le.PutUint32(c[plan.at:], uint32(KindManifest))
			copy(c[plan.at+32:], "manifest\x00")
		}, "section table", []string{"duplicate"}},
		{"misnamed index", func(c []byte) { copy(c[idx.at+32:], "tensor-indeX") }, "section table", []string{"must be named"}},
		{"no manifest", func(c []byte) { le.PutUint32(c[man.at:], uint32(KindBlob)) }, "section table", []string{`no "manifest"`}},
		{"gap", func(c []byte) { le.PutUint64(c[idx.at+16:], uint64(idx.size-64)) }, "section table", []string{"gap"}},
		{"count 0", func(c []byte) { le.PutUint32(c[20:], 0) }, "section table", []string{"count 0"}},
		{"count huge", func(c []byte) { le.PutUint32(c[20:], 1<<30) }, "section table", []string{"count"}},
		{"table past end", func(c []byte) { le.PutUint64(c[24:], 1<<40) }, "section table", []string{"past the end"}},
		{"table misaligned", func(c []byte) { le.PutUint64(c[24:], le.Uint64(c[24:])-8) }, "section table", []string{"multiple of 64"}},
		{"flags", func(c []byte) { le.PutUint32(c[16:], 4) }, "header", []string{"unknown flags"}},
		{"header size", func(c []byte) { le.PutUint32(c[12:], 256) }, "header", []string{"header size 256"}},
		{"reserved header", func(c []byte) { c[100] = 1 }, "header", []string{"reserved byte 100"}},
		{"file size", func(c []byte) { le.PutUint64(c[40:], uint64(len(c)-1)) }, "file", []string{"appended"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := slices.Clone(b)
			tc.edit(c)
			reseal(c)
			_, err := openBytes(c, false)
			wantFormatError(t, err, tc.section, tc.want...)
		})
	}
}

func TestAppendedData(t *testing.T) {
	_, b := sampleFile(t)
	_, err := openBytes(append(slices.Clone(b), 0), false)
	wantFormatError(t, err, "file", "appended")
}

func TestBadMagic(t *testing.T) {
	_, b := sampleFile(t)
	c := slices.Clone(b)
	copy(c, "GGUF\x03\x00\x00\x00")
	_, err := openBytes(c, false)
	wantFormatError(t, err, "header", "bad magic")
	var fe *FormatError
	if !errors.As(err, &fe) || errors.As(err, new(*VersionError)) {
		t.Errorf("bad magic: %T", err)
	}
}
