package quant

import "testing"

// BenchmarkLPBQ quantizes a 1024x1024 N(0,1) matrix; MB/s counts float32
// input bytes.
func BenchmarkLPBQ(b *testing.B) {
	const n = 1024
	w := gaussian(81, n*n, 1)
	for _, tc := range []struct {
		name  string
		block int
		mode  LPBQMode
	}{
		{"b32-refined", 32, LPBQRefined},
		{"b32-reference", 32, LPBQReference},
		{"b16-refined", 16, LPBQRefined},
		{"b64-refined", 64, LPBQRefined},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(4 * n * n)
			for b.Loop() {
				if _, err := QuantizeLPBQ(w, n, n, tc.block, tc.mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQ4HQQ quantizes a 1024x1024 matrix to q4 g32 with HQQ.
func BenchmarkQ4HQQ(b *testing.B) {
	const n = 1024
	w := gaussian(82, n*n, 1)
	for _, sym := range []bool{true, false} {
		name := "asym"
		if sym {
			name = "sym"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(4 * n * n)
			for b.Loop() {
				if _, err := QuantizeQ4(w, n, n, Q4Options{Group: 32, Sym: sym, HQQ: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
