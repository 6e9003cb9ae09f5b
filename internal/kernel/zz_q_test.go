package kernel

import (
	"math/rand/v2"
	"testing"
)

var zzSink float32

func goFloats(x []float32) float32 {
	var s float32
	for _, v := range x[:16] {
		s += v * 1.5
	}
	return s
}

func BenchmarkZZTransition(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, y, o := randFloats(r, 576, 1), randFloats(r, 576, 1), make([]float32, 576)
	row := randFloats(r, 64, 1)
	b.Run("add", func(b *testing.B) {
		for b.Loop() {
			Add(o, x, y)
		}
	})
	b.Run("gofloat+add", func(b *testing.B) {
		for b.Loop() {
			zzSink += goFloats(x)
			Add(o, x, y)
		}
	})
	b.Run("max+gofloat+add", func(b *testing.B) {
		for b.Loop() {
			zzSink += Max(row)
			zzSink += goFloats(x)
			Add(o, x, y)
		}
	})
	b.Run("expsub+gofloat+add", func(b *testing.B) {
		for b.Loop() {
			zzSink += ExpSub(row, 1)
			zzSink += goFloats(x)
			Add(o, x, y)
		}
	})
	b.Run("expsub+add", func(b *testing.B) {
		for b.Loop() {
			zzSink += ExpSub(row, 1)
			Add(o, x, y)
		}
	})
	b.Run("expsub", func(b *testing.B) {
		for b.Loop() {
			zzSink += ExpSub(row, 1)
		}
	})
}
