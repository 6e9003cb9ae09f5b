package pytorch

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/testutil"
)

func openBytes(b []byte) (*Checkpoint, error) {
	return OpenReader(bytes.NewReader(b), int64(len(b)), "test.pth")
}

// archive wraps a pickle and storages into a torch-style zip.
func archive(t testing.TB, pkl []byte, storages ...zipEntry) []byte {
	es := []zipEntry{{name: "archive/data.pkl", data: pkl}, {name: "archive/byteorder", data: []byte("little")}}
	for _, s := range storages {
		s.name = "archive/data/" + s.name
		es = append(es, s)
	}
	return buildZip(t, es)
}

func wantField(t *testing.T, err error, field, msg string) {
	t.Helper()
	var fe *format.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T), want *format.Error", err, err)
	}
	if fe.Field != field || !strings.Contains(fe.Msg, msg) {
		t.Fatalf("error field %q msg %q, want field %q containing %q", fe.Field, fe.Msg, field, msg)
	}
}

func wantUnsupported(t *testing.T, err error, what string) {
	t.Helper()
	var ue *format.UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(ue.What, what) {
		t.Fatalf("error %v, want UnsupportedError mentioning %q", err, what)
	}
}

func TestCraftedGood(t *testing.T) {
	// Two views into one storage, one half tensor, one long tensor.
	pkl := pkStateDict(
		pkTensor("a", "FloatStorage", "0", 6, 0, []int32{2, 2}, []int32{2, 1}),
		pkTensor("b", "FloatStorage", "0", 6, 4, []int32{1, 2}, []int32{7, 1}),
		pkTensor("h", "HalfStorage", "1", 2, 0, []int32{2}, []int32{1}),
		pkTensor("l", "LongStorage", "2", 1, 0, []int32{}, []int32{}),
		pkTensor("tr", "FloatStorage", "0", 6, 0, []int32{2, 2}, []int32{1, 2}),
	)
	b := archive(t, pkl,
		zipEntry{name: "0", data: f32Bytes(1, 2, 3, 4, 5, 6)},
		zipEntry{name: "1", data: []byte{0x00, 0x3c, 0x00, 0xc0}}, // 1.0, -2.0 in f16
		zipEntry{name: "2", data: []byte{0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	)
	c, err := openBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, want ...float32) {
		t.Helper()
		got, err := c.ReadFloat32(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s = %v, want %v", name, got, want)
			}
		}
	}
	check("a", 1, 2, 3, 4)
	check("b", 5, 6)
	check("h", 1, -2)
	check("l", -3)
	_, err = c.ReadFloat32("tr")
	wantUnsupported(t, err, `"tr"`)
	if _, err := c.ReadFloat32("nope"); err == nil {
		t.Error("reading a missing tensor succeeded")
	}
}

func TestCraftedBad(t *testing.T) {
	st := zipEntry{name: "0", data: f32Bytes(1, 2, 3, 4)}
	cases := []struct {
		name, field, msg string
		pkl              []byte
	}{
		{"missing storage", "w", "missing", pkStateDict(pkTensor("w", "FloatStorage", "9", 4, 0, []int32{4}, []int32{1}))},
		{"past storage", "w", "past the storage", pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 1, []int32{4}, []int32{1}))},
		{"stride past storage", "w", "past the storage", pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 0, []int32{2, 2}, []int32{3, 1}))},
		{"numel too big", "w", "declares", pkStateDict(pkTensor("w", "FloatStorage", "0", 5, 0, []int32{4}, []int32{1}))},
		{"overflowing shape", "w", "overflow", pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 0, []int32{1 << 30, 1 << 30, 1 << 30}, []int32{0, 0, 0}))},
		{"huge stride", "w", "past the storage", pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 0, []int32{1 << 20, 1 << 20, 4}, []int32{1 << 30, 1 << 30, 1}))},
		{"negative size", "data.pkl", "non-negative", pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 0, []int32{-4}, []int32{1}))},
		{"unknown opcode", "data.pkl", "opcode 0xff", []byte{0x80, 2, 0xff}},
		{"no stop", "data.pkl", "STOP", []byte{0x80, 2, '}'}},
		{"evil call", "data.pkl", "os.system", append(append([]byte{0x80, 2}, pkGlobal("os", "system")...), append(pkStr("ls"), 0x85, 'R', '.')...)},
		{"memo miss", "data.pkl", "memo index 4000000000", []byte{0x80, 2, 'j', 0x00, 0x28, 0x6b, 0xee, '.'}},
		{"deep marks", "data.pkl", "nested MARKs", bytes.Repeat([]byte{'('}, 5000)},
		{"long string", "data.pkl", "past end", []byte{0x80, 2, 'X', 0xff, 0xff, 0xff, 0x7f, 'a', '.'}},
		{"underflow", "data.pkl", "underflow", []byte{0x80, 2, 's', '.'}},
		{"not a dict", "data.pkl", "top-level", []byte{0x80, 2, 'K', 1, '.'}},
		{"duplicate", "a.b", "twice", pkStateDict(
			pkTensor("a.b", "FloatStorage", "0", 4, 0, []int32{4}, []int32{1}),
			pkStr("a"), pkGlobal("collections", "OrderedDict"), []byte{')', 'R', '('},
			pkTensor("b", "FloatStorage", "0", 4, 0, []int32{4}, []int32{1}), []byte{'u'})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openBytes(archive(t, tc.pkl, st))
			wantField(t, err, tc.field, tc.msg)
		})
	}
}

func TestUnsupportedInputs(t *testing.T) {
	pkl := pkStateDict(pkTensor("w", "FloatStorage", "0", 1, 0, []int32{1}, []int32{1}))
	_, err := openBytes(buildZip(t, []zipEntry{{name: "a/data.pkl", data: pkl}, {name: "a/byteorder", data: []byte("big")}, {name: "a/data/0", data: f32Bytes(1)}}))
	wantUnsupported(t, err, "big")
	_, err = openBytes(archive(t, pkl, zipEntry{name: "0", data: f32Bytes(1), deflat: true}))
	wantUnsupported(t, err, "compressed")
	_, err = openBytes(archive(t, pkStateDict(pkTensor("w", "ComplexFloatStorage", "0", 1, 0, []int32{1}, []int32{1})), zipEntry{name: "0", data: f32Bytes(1)}))
	wantUnsupported(t, err, "ComplexFloatStorage")
	_, err = openBytes([]byte("PK\x03\x04 not really"))
	wantField(t, err, "zip", "zip")
	_, err = openBytes(buildZip(t, []zipEntry{{name: "x/y.txt", data: []byte("hi")}}))
	wantField(t, err, "data.pkl", "no <name>/data.pkl")
}

// TestZipBomb: a small deflated data.pkl that inflates past the cap.
func TestZipBomb(t *testing.T) {
	bomb := make([]byte, 8<<20)
	b := buildZip(t, []zipEntry{{name: "a/data.pkl", data: bomb, deflat: true}})
	if len(b) > 64<<10 {
		t.Fatalf("bomb is %d bytes", len(b))
	}
	_, err := openBytes(b)
	wantField(t, err, "data.pkl", "more than")
}

// TestTruncatedReal cuts the real file at many points: never a panic, and
// every cut is refused.
func TestTruncatedReal(t *testing.T) {
	raw := testutil.ReadFile(t, rwkvPath)
	for n := 0; n < len(raw); n += 1 + n/50 {
		if _, err := openBytes(raw[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: accepted", n, len(raw))
		}
	}
}

// TestFlippedPickle flips each byte of the real data.pkl (rebuilding the
// archive so the CRC matches): the reader must never panic, and whatever
// it accepts must read back.
func TestFlippedPickle(t *testing.T) {
	raw := testutil.ReadFile(t, rwkvPath)
	es := readEntries(t, raw)
	if es[0].name != "no_rosa5/data.pkl" {
		t.Fatalf("first entry %q", es[0].name)
	}
	pkl := es[0].data
	accepted := 0
	for i := 0; i < len(pkl); i += 13 {
		for _, x := range []byte{0xff, 0x01} {
			mut := bytes.Clone(pkl)
			mut[i] ^= x
			if _, err := unpickle(mut); err != nil {
				continue
			}
			es2 := slicesClone(es)
			es2[0].data = mut
			b := buildZip(t, es2)
			c, err := openBytes(b)
			if err != nil {
				continue
			}
			accepted++
			for _, ti := range c.Tensors() {
				if ti.Offset < 0 || ti.Offset+ti.Size > int64(len(b)) {
					t.Fatalf("byte %d: %s at [%d,+%d) outside %d bytes", i, ti.Name, ti.Offset, ti.Size, len(b))
				}
				c.ReadFloat32(ti.Name)
			}
		}
	}
	t.Logf("%d of %d mutations accepted (a changed name or number)", accepted, 2*((len(pkl)+12)/13))
}

func slicesClone(es []zipEntry) []zipEntry { return append([]zipEntry(nil), es...) }

// TestCorruptStorageIsRefused: a flipped byte in a storage entry no longer
// matches the CRC-32 the archive records for it; Open refuses the file
// instead of loading changed weights.
func TestCorruptStorageIsRefused(t *testing.T) {
	pkl := pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 0, []int32{4}, []int32{1}))
	data := f32Bytes(1, 2, 3, 4)
	b := archive(t, pkl, zipEntry{name: "0", data: data})
	if _, err := openBytes(b); err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, data)
	if i < 0 {
		t.Fatal("storage bytes not found in the archive")
	}
	b[i+5] ^= 0x40
	_, err := openBytes(b)
	wantField(t, err, "w", "is corrupt: CRC-32")
}
