package constrain

import (
	"encoding/binary"
	"reflect"
	"slices"
)

// forker is a Recognizer that can copy itself and name its state: two
// recognizers of one origin with equal keys accept the same texts from
// there on. The token search of a Mask needs it.
type forker interface {
	Recognizer
	// fork returns an independent copy at the same state.
	fork() Recognizer
	// appendKey appends the state's key to b.
	appendKey(b []byte) []byte
}

func appendInt(b []byte, v int) []byte { return binary.AppendVarint(b, int64(v)) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendPtr appends the identity of a pointer (0 for nil).
func appendPtr(b []byte, p any) []byte {
	v := reflect.ValueOf(p)
	if !v.IsValid() || v.IsNil() {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(v.Pointer()))
}

func appendStr(b []byte, s string) []byte {
	return append(appendInt(b, len(s)), s...)
}

func (r *GrammarRecognizer) fork() Recognizer {
	c := &GrammarRecognizer{g: r.g, stacks: r.stacks, accept: r.accept, a: r.a}
	c.pend = append([]byte(nil), r.pend...)
	return c
}

func (r *GrammarRecognizer) appendKey(b []byte) []byte {
	b = appendBool(b, r.accept)
	b = appendStr(b, string(r.pend))
	ids := make([]uint32, len(r.stacks))
	for i, f := range r.stacks {
		ids[i] = f.id
	}
	slices.Sort(ids)
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(id))
	}
	return b
}

func (j *JSON) fork() Recognizer {
	c := *j
	c.stack = append([]byte(nil), j.stack...)
	c.scratch = nil
	return &c
}

func (j *JSON) appendKey(b []byte) []byte {
	b = append(b, byte(j.st))
	b = appendStr(b, string(j.stack))
	b = appendStr(b, j.lit)
	b = appendInt(b, j.li)
	b = appendInt(b, j.hex)
	b = appendInt(b, j.ws)
	b = appendBool(b, j.objectOnly)
	return appendBool(b, j.started)
}

func (r *SchemaJSON) fork() Recognizer {
	c := *r
	c.stack = append([]frame(nil), r.stack...)
	c.scratch = nil
	return &c
}

func (r *SchemaJSON) appendKey(b []byte) []byte {
	b = append(b, byte(r.st))
	b = appendPtr(b, r.cur)
	b = appendInt(b, len(r.stack))
	for i := range r.stack {
		f := &r.stack[i]
		b = appendPtr(b, f.obj)
		b = appendPtr(b, f.arr)
		b = appendInt(b, len(f.seen))
		for _, w := range f.seen {
			b = binary.AppendUvarint(b, w)
		}
		b = appendInt(b, f.nseen)
		b = appendInt(b, f.reqSeen)
		b = appendInt(b, f.prop)
		b = appendInt(b, f.count)
	}
	b = appendInt(b, r.lo)
	b = appendInt(b, r.hi)
	b = appendInt(b, r.pos)
	b = appendBool(b, r.exact)
	b = appendBool(b, r.integer)
	b = appendStr(b, r.lit)
	b = appendInt(b, r.li)
	b = appendInt(b, r.hex)
	b = appendInt(b, r.hexv)
	b = appendPtr(b, r.sr)
	// the characters of a string matter only up to its bounds
	chars := r.chars
	if r.sr == nil {
		chars = 0
	} else if r.sr.max < 0 {
		chars = min(chars, max(r.sr.min, 0))
	}
	b = appendInt(b, chars)
	b = appendInt(b, r.u8need)
	b = append(b, r.u8lo, r.u8hi)
	b = appendPtr(b, r.nr)
	if r.nr != nil { // the digits matter only to a bounded number
		b = appendBool(b, r.neg)
		b = binary.AppendVarint(b, r.numv)
		b = appendInt(b, r.ndig)
	}
	b = appendInt(b, r.ws)
	return appendBool(b, r.started)
}

func (s *sequence) fork() Recognizer {
	f, ok := s.inner.(forker)
	if !ok {
		return nil
	}
	c := *s
	c.inner = f.fork()
	return &c
}

func (s *sequence) appendKey(b []byte) []byte {
	b = appendInt(b, s.phase)
	b = appendInt(b, s.li)
	return s.inner.(forker).appendKey(b)
}

func (c *choice) fork() Recognizer {
	alts := make([]Recognizer, len(c.alts))
	for i, r := range c.alts {
		f, ok := r.(forker)
		if !ok {
			return nil
		}
		alts[i] = f.fork()
	}
	return &choice{alts: alts, tags: slices.Clone(c.tags)}
}

func (c *choice) appendKey(b []byte) []byte {
	b = appendInt(b, len(c.alts))
	for i, r := range c.alts {
		b = appendInt(b, c.tags[i])
		k := r.(forker).appendKey(nil)
		b = append(appendInt(b, len(k)), k...)
	}
	return b
}

// canFork reports whether r and everything inside it can fork.
func canFork(r Recognizer) bool {
	switch v := r.(type) {
	case *sequence:
		return canFork(v.inner)
	case *choice:
		for _, a := range v.alts {
			if !canFork(a) {
				return false
			}
		}
		return true
	case forker:
		return true
	}
	return false
}
