package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ggufF32 is a minimal, test-only GGUF v3 reader: it returns the F32
// tensors of a GGUF file by name, so real safetensors fixtures can be
// compared with the llama.cpp conversion of the same weights.
func ggufF32(b []byte) (map[string][]float32, error) {
	p := 0
	fail := func(what string) error { return fmt.Errorf("gguf: truncated at %s (offset %d)", what, p) }
	u32 := func() (uint32, bool) {
		if p+4 > len(b) {
			return 0, false
		}
		v := binary.LittleEndian.Uint32(b[p:])
		p += 4
		return v, true
	}
	u64 := func() (uint64, bool) {
		if p+8 > len(b) {
			return 0, false
		}
		v := binary.LittleEndian.Uint64(b[p:])
		p += 8
		return v, true
	}
	str := func() (string, bool) {
		n, ok := u64()
		if !ok || uint64(len(b)-p) < n {
			return "", false
		}
		s := string(b[p : p+int(n)])
		p += int(n)
		return s, true
	}
	if len(b) < 24 || string(b[:4]) != "GGUF" {
		return nil, fmt.Errorf("gguf: bad magic")
	}
	p = 8
	nt, _ := u64()
	nkv, _ := u64()
	fixed := map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	alignment := uint64(32)
	var skip func(typ uint32) bool
	skip = func(typ uint32) bool {
		if n, ok := fixed[typ]; ok {
			p += n
			return p <= len(b)
		}
		switch typ {
		case 8:
			_, ok := str()
			return ok
		case 9:
			et, ok1 := u32()
			n, ok2 := u64()
			if !ok1 || !ok2 {
				return false
			}
			for i := uint64(0); i < n; i++ {
				if !skip(et) {
					return false
				}
			}
			return true
		}
		return false
	}
	for i := uint64(0); i < nkv; i++ {
		key, ok := str()
		typ, ok2 := u32()
		if !ok || !ok2 {
			return nil, fail("metadata")
		}
		if key == "general.alignment" && typ == 4 {
			a, _ := u32()
			alignment = uint64(a)
			continue
		}
		if !skip(typ) {
			return nil, fail("metadata " + key)
		}
	}
	type info struct {
		n      uint64
		typ    uint32
		offset uint64
	}
	infos := map[string]info{}
	for i := uint64(0); i < nt; i++ {
		name, ok := str()
		nd, ok2 := u32()
		if !ok || !ok2 {
			return nil, fail("tensor info")
		}
		n := uint64(1)
		for d := uint32(0); d < nd; d++ {
			v, _ := u64()
			n *= v
		}
		typ, _ := u32()
		off, ok := u64()
		if !ok {
			return nil, fail("tensor info " + name)
		}
		infos[name] = info{n, typ, off}
	}
	data := (uint64(p) + alignment - 1) / alignment * alignment
	out := map[string][]float32{}
	for name, in := range infos {
		if in.typ != 0 { // F32 only
			continue
		}
		start := data + in.offset
		if start+4*in.n > uint64(len(b)) {
			return nil, fmt.Errorf("gguf: tensor %s past end", name)
		}
		v := make([]float32, in.n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[start+4*uint64(i):]))
		}
		out[name] = v
	}
	return out, nil
}
