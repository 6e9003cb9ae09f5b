package hugemem

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestBytes: every size gives that many zero, writable bytes; large ones
// start on a huge-page boundary on Linux, with no capacity past the end.
func TestBytes(t *testing.T) {
	for _, n := range []int{0, 1, 4095, minAdvised - 1, minAdvised, minAdvised + 12345, 3 * minAdvised} {
		b := Bytes(n)
		if len(b) != n || cap(b) != n && n >= minAdvised {
			t.Fatalf("Bytes(%d): len %d cap %d", n, len(b), cap(b))
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("Bytes(%d)[%d] = %d, want 0", n, i, b[i])
			}
			b[i] = byte(i)
		}
		if n == 0 {
			continue
		}
		start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if aligned := start%pageSize == 0; runtime.GOOS == "linux" && n >= minAdvised && !aligned {
			t.Fatalf("Bytes(%d) at %#x: not aligned to a huge page", n, start)
		}
		if b[n-1] != byte(n-1) {
			t.Fatalf("Bytes(%d): last byte lost", n)
		}
	}
}

// TestTyped: the typed views have the asked length, zero values, and keep
// what is written (they are the same memory as Bytes gives).
func TestTyped(t *testing.T) {
	for _, n := range []int{0, 7, minAdvised/2 + 3} {
		u := Uint16s(n)
		f := Float32s(n)
		c := Uint8s(n)
		if len(u) != n || len(f) != n || len(c) != n {
			t.Fatalf("n %d: lengths %d %d %d", n, len(u), len(f), len(c))
		}
		for i := range u {
			if u[i] != 0 || f[i] != 0 || c[i] != 0 {
				t.Fatalf("n %d: value %d not zero", n, i)
			}
			u[i], f[i], c[i] = uint16(i), float32(i)/2, uint8(i)
		}
		runtime.GC() // the views keep their memory alive
		for i := range u {
			if u[i] != uint16(i) || f[i] != float32(i)/2 || c[i] != uint8(i) {
				t.Fatalf("n %d: value %d changed", n, i)
			}
		}
	}
}
