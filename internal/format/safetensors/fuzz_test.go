package safetensors

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// FuzzOpenReader feeds arbitrary bytes to the parser: it must never panic,
// and whatever it accepts must describe data inside the input.
func FuzzOpenReader(f *testing.F) {
	real := testutil.ReadFile(f, "arch/llama/model.safetensors")
	n := binary.LittleEndian.Uint64(real)
	f.Add(real[:8+n])      // the real header without its data
	f.Add(real[:8+n+4096]) // and with the first tensor's bytes
	var small bytes.Buffer
	if err := Encode(&small, randomTensors(rand.New(rand.NewPCG(5, 6))), map[string]string{"format": "pt"}); err != nil {
		f.Fatal(err)
	}
	f.Add(small.Bytes())
	f.Add(craft(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12))
	f.Add(craft(`{"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}`, 0))
	f.Add(craft(`{"w":{"dtype":"F8_E5M2","shape":[3],"data_offsets":[0,3]},"__metadata__":{"a":"b"}}`, 3))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := OpenReader(bytes.NewReader(b), int64(len(b)), "fuzz")
		if err != nil {
			return
		}
		defer c.Close()
		for _, ti := range c.Tensors() {
			if ti.Offset < 8 || ti.Size < 0 || ti.Offset+ti.Size > int64(len(b)) {
				t.Fatalf("%s: [%d,+%d) outside the %d-byte input", ti.Name, ti.Offset, ti.Size, len(b))
			}
			raw, err := c.Bytes(ti.Name)
			if err != nil || int64(len(raw)) != ti.Size {
				t.Fatalf("%s: Bytes %d %v", ti.Name, len(raw), err)
			}
			if v, err := c.ReadFloat32(ti.Name); err == nil && int64(len(v)) != ti.NumElements() {
				t.Fatalf("%s: %d values for %d elements", ti.Name, len(v), ti.NumElements())
			}
		}
	})
}
