package gguf

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestDequantizeMatchesGGML compares every dequantizer with ggml's own on
// the blocks in testdata/dequant/<TYPE>.bin. Each file holds u32 n values,
// u32 n bytes, the blocks, then ggml's n float32 values (little-endian).
// The first blocks come from ggml_quantize_chunk on random floats, the rest
// are random bytes with finite scales, so every bit of every field is
// exercised.
//
// The files were written by a small C program in a scratch folder, linked
// against ggml from llama.cpp (github.com/unslothai/llama.cpp, commit
// d32676d77, CPU build with -DGGML_NATIVE=ON), calling ggml_quantize_chunk
// and ggml_get_type_traits(type)->to_float. ggml's C may fuse a multiply
// and an add (FMA) where this package rounds the product first, so values
// may differ by an ulp; the tolerance is 2 ulps of the value.
func TestDequantizeMatchesGGML(t *testing.T) {
	for _, typ := range []GGMLType{TypeQ4_0, TypeQ8_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ2_K, TypeQ3_K, TypeQ4_K,
		TypeQ5_K, TypeQ6_K, TypeQ8_K, TypeIQ4_NL, TypeIQ4_XS, TypeMXFP4} {
		t.Run(typ.String(), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "dequant", typ.String()+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			n := int(binary.LittleEndian.Uint32(b))
			nb := int(binary.LittleEndian.Uint32(b[4:]))
			if int64(nb) != int64(n)/typ.BlockSize()*typ.BlockBytes() || len(b) != 8+nb+4*n {
				t.Fatalf("file holds %d bytes for %d values of %v", nb, n, typ)
			}
			src := b[8 : 8+nb]
			got := make([]float32, n)
			if !Dequantize(typ, got, src) {
				t.Fatalf("no dequantizer for %v", typ)
			}
			nonzero := 0
			for i := range n {
				want := math.Float32frombits(binary.LittleEndian.Uint32(b[8+nb+4*i:]))
				if want != 0 {
					nonzero++
				}
				tol := 2 * ulp(want)
				if d := math.Abs(float64(got[i] - want)); d > float64(tol) || math.IsNaN(float64(got[i])) {
					t.Fatalf("value %d (block %d): got %g, ggml %g", i, int64(i)/typ.BlockSize(), got[i], want)
				}
			}
			if nonzero < n/2 {
				t.Fatalf("only %d of %d reference values are nonzero", nonzero, n)
			}
		})
	}
}

// ulp is the spacing of float32 values at v.
func ulp(v float32) float32 {
	a := math.Abs(float64(v))
	return float32(math.Nextafter32(float32(a), float32(math.Inf(1))) - float32(a))
}

// TestReadFloat32KQuant reads a Q4_K tensor through a file, as a model
// loader does, and checks it against the dequantizer.
func TestReadFloat32KQuant(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "dequant", "Q4_K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	nb := int(binary.LittleEndian.Uint32(b[4:]))
	blocks := b[8 : 8+nb]
	rows := nb / 144 / 2
	file := head(1, 0).tinfo("w", TypeQ4_K, 0, 512, uint64(rows)).data(nb).b
	copy(file[len(file)-nb:], blocks)
	f, err := openBytes(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadFloat32("w")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(got))
	DequantizeQ4_K(want, blocks)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("value %d: %g, want %g", i, got[i], want[i])
		}
	}
}
