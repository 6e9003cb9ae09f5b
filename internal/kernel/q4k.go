package kernel

import (
	"encoding/binary"
	"math"
)

// The K4 form of Q4 (ggml's Q4_K super-blocks, kept as they are).
const (
	// Q4KSuper is the number of inputs of a super-block: 8 blocks of 32
	// share its d and dmin.
	Q4KSuper = 256
	// Q4KChunkBytes is the size of the record of 16 blocks (two
	// super-blocks) in Q4.K4: sc [16]u8 | m [16]u8 | d0, dmin0, d1, dmin1
	// float32 (little-endian).
	Q4KChunkBytes = 48
)

// q4KChunks is the number of 16-block records of a row of K inputs.
func q4KChunks(K int) int { return (K/QK + 15) / 16 }

// Q4KChunk writes into rec (Q4KChunkBytes) the record of up to 16 blocks:
// their 6-bit scales sc and minimums m (blocks past len(sc) get zeros),
// and the super-blocks' d and dmin (d[1], dmin[1] only when there are more
// than 8 blocks; else zeros).
func Q4KChunk(rec []byte, sc, m []uint8, d, dmin []float32) {
	clear(rec[:Q4KChunkBytes])
	copy(rec[0:16], sc)
	copy(rec[16:32], m)
	for i := range min(len(d), 2) {
		binary.LittleEndian.PutUint32(rec[32+8*i:], math.Float32bits(d[i]))
		binary.LittleEndian.PutUint32(rec[36+8*i:], math.Float32bits(dmin[i]))
	}
}

// k4Block returns the scale d*sc and the minimum term dmin*m of block b
// of row n of a K4 weight (each one float32 product of a 6-bit integer
// and a float, as ggml computes them).
func (w *Q4) k4Block(n, b int) (scale, minimum float32) {
	nc := q4KChunks(w.K)
	rec := w.K4[(n*nc+b/16)*Q4KChunkBytes:]
	j := b % 16
	s := 8 * (j / 8)
	d := math.Float32frombits(binary.LittleEndian.Uint32(rec[32+s:]))
	dmin := math.Float32frombits(binary.LittleEndian.Uint32(rec[36+s:]))
	// explicit roundings: neither product fuses into a later add (arm64)
	return float32(d * float32(rec[j])), float32(dmin * float32(rec[16+j]))
}
