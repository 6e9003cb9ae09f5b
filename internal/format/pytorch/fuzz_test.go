package pytorch

import (
	"bytes"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// checkAccepted asserts that an accepted checkpoint only describes bytes
// inside the input and reads back with the listed element counts.
func checkAccepted(t *testing.T, c *Checkpoint, size int) {
	for _, ti := range c.Tensors() {
		if ti.Offset < 0 || ti.Size < 0 || ti.Offset+ti.Size > int64(size) {
			t.Fatalf("%s: [%d,+%d) outside the %d-byte input", ti.Name, ti.Offset, ti.Size, size)
		}
		v, err := c.ReadFloat32(ti.Name)
		if err == nil && int64(len(v)) != ti.NumElements() {
			t.Fatalf("%s: %d values for %d elements", ti.Name, len(v), ti.NumElements())
		}
	}
}

// FuzzOpenReader feeds arbitrary bytes as a whole file: it must never panic.
func FuzzOpenReader(f *testing.F) {
	raw := testutil.ReadFile(f, rwkvPath)
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	st := zipEntry{name: "0", data: f32Bytes(1, 2, 3, 4)}
	f.Add(archive(f, pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 0, []int32{2, 2}, []int32{2, 1})), st))
	f.Add(archive(f, pkStateDict(pkTensor("w", "FloatStorage", "0", 4, 3, []int32{1 << 20, 4}, []int32{1 << 30, 1})), st))
	f.Add(archive(f, []byte{0x80, 2, 'j', 0xff, 0xff, 0xff, 0xff, '.'}, st))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := openBytes(b)
		if err != nil {
			return
		}
		checkAccepted(t, c, len(b))
	})
}

// FuzzPickle runs arbitrary pickles against the real checkpoint's storages,
// so mutations get past the zip layer into the pickle machine and the
// tensor placement checks.
func FuzzPickle(f *testing.F) {
	raw := testutil.ReadFile(f, rwkvPath)
	es := readEntries(f, raw)
	f.Add(es[0].data)
	f.Add(pkStateDict(pkTensor("e.weight", "FloatStorage", "0", 384, 380, []int32{2, 2}, []int32{1, 2})))
	f.Add(pkStateDict(pkTensor("x", "HalfStorage", "1", 64, 0, []int32{64}, []int32{1})))
	f.Add(append(append([]byte{0x80, 2}, pkGlobal("builtins", "eval")...), append(pkStr("1"), 0x85, 'R', '.')...))
	f.Add(bytes.Repeat([]byte{'(', ']', 'q', 0}, 300))
	f.Fuzz(func(t *testing.T, pkl []byte) {
		if _, err := unpickle(pkl); err != nil {
			return
		}
		mod := append([]zipEntry(nil), es...)
		mod[0].data = pkl
		b := buildZip(t, mod)
		c, err := openBytes(b)
		if err != nil {
			return
		}
		checkAccepted(t, c, len(b))
	})
}
