package llama2c

import (
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// FuzzOpenReader feeds arbitrary bytes to the parser: it must never panic,
// and whatever it accepts must read back tensors of the listed sizes.
func FuzzOpenReader(f *testing.F) {
	real := testutil.ReadFile(f, "llama2c/stories260K.bin")
	f.Add(real[:4096]) // the real header and the start of its embeddings
	for _, shared := range []bool{true, false} {
		cfg := smallConfig(shared)
		m := randomModel(cfg, 9)
		f.Add(encodeFile(f, WriteV0, cfg, m))
		f.Add(encodeFile(f, WriteV1, cfg, m))
		f.Add(encodeFile(f, WriteV2, cfg, m))
	}
	f.Add([]byte{0x32, 0x34, 0x6b, 0x61, 2, 0, 0, 0})
	f.Add(make([]byte, 28))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := openBytes(b)
		if err != nil {
			return
		}
		for _, ti := range c.Tensors() {
			if ti.Offset+ti.Size > int64(len(b)) {
				t.Fatalf("%s past the end", ti.Name)
			}
			v, err := c.ReadFloat32(ti.Name)
			if err != nil || int64(len(v)) != ti.NumElements() {
				t.Fatalf("%s: %d values for %d elements: %v", ti.Name, len(v), ti.NumElements(), err)
			}
		}
	})
}
