package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
)

// craft builds a file from a header string and a data buffer of n bytes.
func craft(header string, n int) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(make([]byte, n))
	return b.Bytes()
}

func openBytes(b []byte) (*Checkpoint, error) {
	return OpenReader(bytes.NewReader(b), int64(len(b)), "crafted.safetensors")
}

func TestHostileInputs(t *testing.T) {
	long := craft(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)
	binary.LittleEndian.PutUint64(long, 1<<40)
	cases := []struct {
		name, field string
		file        []byte
	}{
		{"empty file", "header length", nil},
		{"truncated length", "header length", []byte{1, 2, 3}},
		{"header larger than file", "header length", long},
		{"header one past end", "header length", craft(`{}`, 0)[:9]},
		{"not JSON", "header", craft(`hello`, 0)},
		{"JSON array", "header", craft(`[1,2]`, 0)},
		{"trailing garbage", "header", craft(`{} x`, 0)},
		{"unterminated", "a", craft(`{"a":{"dtype":"F32"`, 0)},
		{"unterminated object", "header", craft(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, 0)},
		{"end before begin", "w", craft(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}`, 8)},
		{"past the end", "w", craft(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, 8)},
		{"negative offset", "w", craft(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, 8)},
		{"size mismatch", "w", craft(`{"w":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}}`, 8)},
		{"three offsets", "w", craft(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, 8)},
		{"fractional offset", "w", craft(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}}`, 8)},
		{"missing dtype", "w", craft(`{"w":{"shape":[1],"data_offsets":[0,4]}}`, 8)},
		{"missing shape", "w", craft(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, 8)},
		{"missing offsets", "w", craft(`{"w":{"dtype":"F32","shape":[1]}}`, 8)},
		{"negative dim", "w", craft(`{"w":{"dtype":"F32","shape":[-1,-4],"data_offsets":[0,16]}}`, 16)},
		{"shape overflow", "w", craft(`{"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}`, 0)},
		{"bytes overflow", "w", craft(`{"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}}`, 0)},
		{"huge offset", "w", craft(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,99999999999999999999]}}`, 8)},
		{"overlap", "b", craft(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12)},
		{"identical ranges", "b", craft(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)},
		{"duplicate name", "a", craft(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8)},
		{"metadata not strings", "__metadata__", craft(`{"__metadata__":{"k":1}}`, 0)},
		{"entry not object", "w", craft(`{"w":[1]}`, 0)},
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
			if fe.Field != tc.field || fe.Format != "safetensors" || fe.File != "crafted.safetensors" {
				t.Errorf("error %q names field %q, want %q", err, fe.Field, tc.field)
			}
		})
	}
}

func TestUnknownDType(t *testing.T) {
	_, err := openBytes(craft(`{"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}}`, 1))
	var ue *format.UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(ue.What, `"w"`) || !strings.Contains(ue.What, "Q9") {
		t.Fatalf("error %v, want UnsupportedError naming w and Q9", err)
	}
}

func TestListedButUnreadable(t *testing.T) {
	c, err := openBytes(craft(`{"__metadata__":{"format":"pt"},`+
		`"f8":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[16,20]},`+
		`"i":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},`+
		`"e":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]},`+
		`"s":{"dtype":"BF16","shape":[],"data_offsets":[20,22]}}`, 24))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := []string{}
	for _, ti := range c.Tensors() {
		names = append(names, ti.Name)
	}
	// file order, zero-size "e" at offset 8 after "i"; a gap of 8 bytes before f8 is allowed.
	if strings.Join(names, ",") != "i,e,f8,s" {
		t.Errorf("order %v, want i,e,f8,s", names)
	}
	for _, name := range []string{"f8", "i"} {
		_, err := c.ReadFloat32(name)
		var ue *format.UnsupportedError
		dt, _ := c.DTypeName(name)
		if !errors.As(err, &ue) || !strings.Contains(ue.What, name) || !strings.Contains(ue.What, dt) {
			t.Errorf("%s: error %v, want UnsupportedError naming tensor and %s", name, err, dt)
		}
	}
	if v, err := c.ReadFloat32("e"); err != nil || len(v) != 0 {
		t.Errorf("empty tensor: %v %v", v, err)
	}
	if v, err := c.ReadFloat32("s"); err != nil || len(v) != 1 || v[0] != 0 {
		t.Errorf("scalar: %v %v", v, err)
	}
	if _, err := c.ReadFloat32("nope"); err == nil {
		t.Error("missing tensor read")
	}
}
