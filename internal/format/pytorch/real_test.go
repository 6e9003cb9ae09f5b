package pytorch

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

const rwkvPath = "rwkv/260123_reverse_L2_only_rwkv7.pth"

// TestRWKV7 opens the real RWKV-7 checkpoint. Expected shapes come from the
// model description (n_embd 32, vocab 12, FFN 128, LoRA 8, 2 heads x 16,
// 2 layers) and the parameter count 39,564 from the test data's notes.
func TestRWKV7(t *testing.T) {
	c, err := Open(testutil.Path(t, rwkvPath))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Format() != "pytorch" {
		t.Errorf("Format() = %q", c.Format())
	}
	infos := c.Tensors()
	// Per layer: ln a/b/c (6), time-mix (26), ROSA branch (12), FFN (3);
	// plus e.weight, lno.weight/bias, o.weight/bias.
	if len(infos) != 2*(6+26+12+3)+5 {
		t.Errorf("%d tensors, want %d", len(infos), 2*(6+26+12+3)+5)
	}
	want := map[string][]int64{
		"e.weight":                {12, 32},
		"ln1a.weight":             {32},
		"rwkv1.x_r":               {1, 1, 32},
		"rwkv1.w1":                {32, 8},
		"rwkv1.w2":                {8, 32},
		"rwkv2.a1":                {32, 8},
		"rwkv2.v2":                {8, 32},
		"rwkv2.g1":                {32, 8},
		"rwkv1.r_k":               {2, 16},
		"rwkv1.receptance.weight": {32, 32},
		"rwkv2.output.weight":     {32, 32},
		"rwkv2.ln_x.weight":       {32},
		"rosa1.o.bias":            {32},
		"ffn1.key.weight":         {128, 32},
		"ffn2.value.weight":       {32, 128},
		"lno.weight":              {32},
		"o.weight":                {12, 32},
		"o.bias":                  {12},
	}
	for name, shape := range want {
		ti, ok := format.Find(c, name)
		if !ok {
			t.Errorf("tensor %q missing", name)
			continue
		}
		if !slices.Equal(ti.Shape, shape) || ti.DType != tensor.F32 {
			t.Errorf("%s: %v %v, want f32 %v", name, ti.DType, ti.Shape, shape)
		}
	}
	if infos[0].Name != "e.weight" || infos[len(infos)-1].Name != "o.bias" {
		t.Errorf("order: first %q last %q, want e.weight .. o.bias", infos[0].Name, infos[len(infos)-1].Name)
	}
	var total int64
	for _, ti := range infos {
		total += ti.NumElements()
		v, err := c.ReadFloat32(ti.Name)
		if err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		if int64(len(v)) != ti.NumElements() {
			t.Fatalf("%s: %d values, want %d", ti.Name, len(v), ti.NumElements())
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s[%d] = %v", ti.Name, i, x)
			}
		}
	}
	if total != 39564 {
		t.Errorf("%d parameters, want 39564", total)
	}
	// The ROSA output bias is non-zero (up to 2.47 in magnitude).
	rb, _ := c.ReadFloat32("rosa1.o.bias")
	rb2, _ := c.ReadFloat32("rosa2.o.bias")
	maxAbs := 0.0
	for _, x := range append(rb, rb2...) {
		maxAbs = max(maxAbs, math.Abs(float64(x)))
	}
	if maxAbs < 2.4 || maxAbs > 2.5 {
		t.Errorf("max |rosa o.bias| = %v, want about 2.47", maxAbs)
	}
	if len(c.Metadata()) != 0 {
		t.Errorf("metadata %v, want none for a plain state dict", c.Metadata())
	}
}

// TestRWKV7AgainstZip compares every tensor with its storage entry read
// independently through archive/zip (which also checks the CRC).
func TestRWKV7AgainstZip(t *testing.T) {
	raw := testutil.ReadFile(t, rwkvPath)
	c, err := OpenReader(bytes.NewReader(raw), int64(len(raw)), "rwkv7.pth")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	// In this file storage i holds the i-th tensor, whole, at offset 0.
	for i, ti := range c.Tensors() {
		f, err := zr.Open("no_rosa5/data/" + itoa(i))
		if err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != ti.Size || ti.Size != 4*ti.NumElements() {
			t.Fatalf("%s: entry %d bytes, Size %d", ti.Name, len(b), ti.Size)
		}
		if ti.Offset%64 != 0 {
			t.Errorf("%s: offset %d not 64-byte aligned (.storage_alignment says 64)", ti.Name, ti.Offset)
		}
		v, err := c.ReadFloat32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		for j := range v {
			if w := math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])); v[j] != w {
				t.Fatalf("%s[%d] = %v, zip entry holds %v", ti.Name, j, v[j], w)
			}
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
