package llama2c

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
)

func TestHostileInputs(t *testing.T) {
	shared := smallConfig(true)
	unshared := smallConfig(false)
	v0 := encodeFile(t, WriteV0, unshared, randomModel(unshared, 2))
	v1 := encodeFile(t, WriteV1, shared, randomModel(shared, 3))
	v2 := encodeFile(t, WriteV2, unshared, randomModel(unshared, 4))
	put := func(b []byte, off int, v int32) []byte {
		b = append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(b[off:], uint32(v))
		return b
	}
	cases := []struct {
		name, field string
		file        []byte
	}{
		{"empty", "header", nil},
		{"short legacy header", "header", v0[:27]},
		{"short v1 header", "header", v1[:100]},
		{"zero dim", "dim", put(v0, 0, 0)},
		{"absurd dim", "dim", put(v0, 0, 1<<20)},
		{"negative layers", "n_layers", put(v0, 8, -2)},
		{"zero hidden", "hidden_dim", put(v0, 4, 0)},
		{"dim not multiple of heads", "n_heads", put(v0, 12, 5)},
		{"heads not multiple of kv heads", "n_kv_heads", put(v0, 16, 3)},
		{"more kv heads than heads", "n_kv_heads", put(v0, 16, 8)},
		{"odd head size", "n_heads", put(put(v0, 12, 16), 16, 16)},
		{"vocab min int32", "vocab_size", put(v0, 20, -1<<31)},
		{"zero seq_len", "seq_len", put(v0, 24, 0)},
		{"v1 negative vocab", "vocab_size", put(v1, 28, -10)},
		{"v1 bad shared flag", "shared_classifier", func() []byte { b := append([]byte(nil), v1...); b[36] = 7; return b }()},
		{"v2 zero group", "group_size", put(v2, 37, 0)},
		{"v2 group not dividing dim", "group_size", put(v2, 37, 3)},
		{"v2 huge group", "group_size", put(v2, 37, 1<<30)},
		{"truncated by one byte", "output.weight", v0[:len(v0)-1]},
		{"truncated inside the first tensor", "tok_embeddings.weight", v0[:100]},
		{"v1 truncated after the header", "layers.0.attention_norm.weight", v1[:256]},
		{"v2 truncated", "layers.1.feed_forward.w3.weight", v2[:len(v2)-10*16-40-1]},
		{"trailing byte", "file size", append(append([]byte(nil), v0...), 0)},
		{"v1 read as larger model", "output.weight", put(v1, 36, 0)},
		{"bigger seq_len than the file", "freq_cis_real", put(v0, 24, 1000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := openBytes(tc.file)
			if err == nil {
				c.Close()
				t.Fatal("opened")
			}
			var fe *format.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *format.Error", err, err)
			}
			if fe.Field != tc.field || fe.Format != "llama2c" || fe.File != "crafted.bin" {
				t.Errorf("error %q names field %q, want %q", err, fe.Field, tc.field)
			}
		})
	}
	_, err := openBytes(put(v1, 4, 3))
	var ue *format.UnsupportedError
	if !errors.As(err, &ue) {
		t.Errorf("version 3: error %v, want *format.UnsupportedError", err)
	}
	c, _ := openBytes(v1)
	if _, err := c.ReadFloat32("layers.9.attention.wq.weight"); err == nil {
		t.Error("read a tensor that does not exist")
	}
	if _, _, err := c.Quantized("norm.weight"); err == nil {
		t.Error("Quantized of a float32 tensor succeeded")
	}
}
