package pytorch

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Limits on hostile pickles. Real state dicts stay far below them.
const (
	maxStack = 1 << 20 // values on the stack at once
	maxMarks = 1 << 10 // open MARKs (nesting depth of tuples/lists/dicts)
	maxMemo  = 1 << 22 // distinct memo slots
	maxDims  = 64      // tensor rank
)

// pickleError is a malformed pickle: an offset and what was wrong there.
type pickleError struct {
	off int
	msg string
}

func (e *pickleError) Error() string { return fmt.Sprintf("offset %d: %s", e.off, e.msg) }

// machine runs a pickle program, building only plain values.
type machine struct {
	data  []byte
	pos   int
	op    int // offset of the current opcode
	stack []any
	marks []int
	memo  map[uint32]any
}

// unpickle runs data and returns the value STOP leaves on top of the stack.
func unpickle(data []byte) (any, error) {
	m := &machine{data: data, memo: map[uint32]any{}}
	return m.run()
}

func (m *machine) fail(format string, args ...any) error {
	return &pickleError{off: m.op, msg: fmt.Sprintf(format, args...)}
}

func (m *machine) read(n int) ([]byte, error) {
	if n < 0 || n > len(m.data)-m.pos {
		return nil, m.fail("truncated: need %d bytes, %d left", n, len(m.data)-m.pos)
	}
	b := m.data[m.pos : m.pos+n]
	m.pos += n
	return b, nil
}

func (m *machine) readLine() (string, error) {
	for i := m.pos; i < len(m.data); i++ {
		if m.data[i] == '\n' {
			s := string(m.data[m.pos:i])
			m.pos = i + 1
			return s, nil
		}
	}
	return "", m.fail("truncated: unterminated line")
}

func (m *machine) push(v any) error {
	if len(m.stack) >= maxStack {
		return m.fail("stack deeper than %d", maxStack)
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *machine) pop() (any, error) {
	if len(m.stack) == 0 || (len(m.marks) > 0 && len(m.stack) == m.marks[len(m.marks)-1]) {
		return nil, m.fail("stack underflow")
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

func (m *machine) top() (any, error) {
	if len(m.stack) == 0 || (len(m.marks) > 0 && len(m.stack) == m.marks[len(m.marks)-1]) {
		return nil, m.fail("stack underflow")
	}
	return m.stack[len(m.stack)-1], nil
}

// popMark returns the values pushed since the last MARK and drops the mark.
func (m *machine) popMark() ([]any, error) {
	if len(m.marks) == 0 {
		return nil, m.fail("no MARK on the stack")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := append([]any(nil), m.stack[k:]...)
	m.stack = m.stack[:k]
	return items, nil
}

func (m *machine) memoPut(i uint32) error {
	v, err := m.top()
	if err != nil {
		return err
	}
	if _, ok := m.memo[i]; !ok && len(m.memo) >= maxMemo {
		return m.fail("more than %d memo entries", maxMemo)
	}
	m.memo[i] = v
	return nil
}

func (m *machine) memoGet(i uint32) error {
	v, ok := m.memo[i]
	if !ok {
		return m.fail("memo index %d not set", i)
	}
	return m.push(v)
}

func (m *machine) str(n uint64) error {
	if n > uint64(len(m.data)-m.pos) {
		return m.fail("string of %d bytes past end of pickle", n)
	}
	b, _ := m.read(int(n))
	if !utf8.Valid(b) {
		return m.fail("string is not valid UTF-8")
	}
	return m.push(string(b))
}

func (m *machine) run() (any, error) {
	le := binary.LittleEndian
	for {
		m.op = m.pos
		b, err := m.read(1)
		if err != nil {
			return nil, m.fail("truncated: no STOP opcode")
		}
		switch op := b[0]; op {
		case 0x80: // PROTO
			p, rerr := m.read(1)
			if rerr != nil {
				return nil, rerr
			}
			if p[0] > 5 {
				return nil, m.fail("pickle protocol %d", p[0])
			}
		case 0x95: // FRAME: an 8-byte length hint, nothing to do
			if _, err := m.read(8); err != nil {
				return nil, err
			}
		case '.': // STOP
			return m.pop()
		case '}': // EMPTY_DICT
			err = m.push(&dict{})
		case ']': // EMPTY_LIST
			err = m.push(&list{})
		case ')': // EMPTY_TUPLE
			err = m.push(tuple{})
		case '(': // MARK
			if len(m.marks) >= maxMarks {
				return nil, m.fail("more than %d nested MARKs", maxMarks)
			}
			m.marks = append(m.marks, len(m.stack))
		case 't': // TUPLE
			items, rerr := m.popMark()
			if rerr != nil {
				return nil, rerr
			}
			err = m.push(tuple(items))
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			n := int(op-0x85) + 1
			t := make(tuple, n)
			for i := n - 1; i >= 0; i-- {
				if t[i], err = m.pop(); err != nil {
					return nil, err
				}
			}
			err = m.push(t)
		case 'X': // BINUNICODE
			n, rerr := m.read(4)
			if rerr != nil {
				return nil, rerr
			}
			err = m.str(uint64(le.Uint32(n)))
		case 0x8c: // SHORT_BINUNICODE
			n, rerr := m.read(1)
			if rerr != nil {
				return nil, rerr
			}
			err = m.str(uint64(n[0]))
		case 0x8d: // BINUNICODE8
			n, rerr := m.read(8)
			if rerr != nil {
				return nil, rerr
			}
			err = m.str(le.Uint64(n))
		case 'J': // BININT
			v, rerr := m.read(4)
			if rerr != nil {
				return nil, rerr
			}
			err = m.push(int64(int32(le.Uint32(v))))
		case 'K': // BININT1
			v, rerr := m.read(1)
			if rerr != nil {
				return nil, rerr
			}
			err = m.push(int64(v[0]))
		case 'M': // BININT2
			v, rerr := m.read(2)
			if rerr != nil {
				return nil, rerr
			}
			err = m.push(int64(le.Uint16(v)))
		case 0x8a: // LONG1
			err = m.long1()
		case 'G': // BINFLOAT, big-endian
			v, rerr := m.read(8)
			if rerr != nil {
				return nil, rerr
			}
			err = m.push(math.Float64frombits(binary.BigEndian.Uint64(v)))
		case 'N': // NONE
			err = m.push(nil)
		case 0x88: // NEWTRUE
			err = m.push(true)
		case 0x89: // NEWFALSE
			err = m.push(false)
		case 'q': // BINPUT
			v, rerr := m.read(1)
			if rerr != nil {
				return nil, rerr
			}
			err = m.memoPut(uint32(v[0]))
		case 'r': // LONG_BINPUT
			v, rerr := m.read(4)
			if rerr != nil {
				return nil, rerr
			}
			err = m.memoPut(le.Uint32(v))
		case 0x94: // MEMOIZE
			err = m.memoPut(uint32(len(m.memo)))
		case 'h': // BINGET
			v, rerr := m.read(1)
			if rerr != nil {
				return nil, rerr
			}
			err = m.memoGet(uint32(v[0]))
		case 'j': // LONG_BINGET
			v, rerr := m.read(4)
			if rerr != nil {
				return nil, rerr
			}
			err = m.memoGet(le.Uint32(v))
		case 's': // SETITEM
			err = m.setItem()
		case 'u': // SETITEMS
			err = m.setItems()
		case 'a': // APPEND
			err = m.appendOne()
		case 'e': // APPENDS
			err = m.appends()
		case 'c': // GLOBAL
			mod, rerr := m.readLine()
			if rerr != nil {
				return nil, rerr
			}
			name, rerr := m.readLine()
			if rerr != nil {
				return nil, rerr
			}
			err = m.push(global{mod, name})
		case 0x93: // STACK_GLOBAL
			err = m.stackGlobal()
		case 'R': // REDUCE
			err = m.reduce()
		case 'Q': // BINPERSID
			err = m.persID()
		case 'b': // BUILD
			err = m.build()
		default:
			return nil, m.fail("unsupported pickle opcode 0x%02x", op)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (m *machine) long1() error {
	n, err := m.read(1)
	if err != nil {
		return err
	}
	if n[0] > 8 {
		return m.fail("LONG1 of %d bytes does not fit int64", n[0])
	}
	v, err := m.read(int(n[0]))
	if err != nil {
		return err
	}
	var buf [8]byte
	copy(buf[:], v)
	if len(v) > 0 && v[len(v)-1]&0x80 != 0 { // sign-extend
		for i := len(v); i < 8; i++ {
			buf[i] = 0xff
		}
	}
	return m.push(int64(binary.LittleEndian.Uint64(buf[:])))
}

func (m *machine) stackGlobal() error {
	name, err := m.pop()
	if err != nil {
		return err
	}
	mod, err := m.pop()
	if err != nil {
		return err
	}
	ms, ok1 := mod.(string)
	ns, ok2 := name.(string)
	if !ok1 || !ok2 {
		return m.fail("STACK_GLOBAL operands are not strings")
	}
	return m.push(global{ms, ns})
}

func (m *machine) setItem() error {
	v, err := m.pop()
	if err != nil {
		return err
	}
	k, err := m.pop()
	if err != nil {
		return err
	}
	return m.setPairs("SETITEM", []any{k, v})
}

func (m *machine) setItems() error {
	items, err := m.popMark()
	if err != nil {
		return err
	}
	return m.setPairs("SETITEMS", items)
}

// setPairs stores key/value pairs into the dict on top of the stack.
func (m *machine) setPairs(op string, items []any) error {
	if len(items)%2 != 0 {
		return m.fail("%s with an odd number (%d) of items", op, len(items))
	}
	t, err := m.top()
	if err != nil {
		return err
	}
	d, ok := t.(*dict)
	if !ok {
		return m.fail("%s on %T", op, t)
	}
	for i := 0; i < len(items); i += 2 {
		d.set(items[i], items[i+1])
	}
	return nil
}

func (m *machine) appendOne() error {
	v, err := m.pop()
	if err != nil {
		return err
	}
	return m.appendItems("APPEND", []any{v})
}

func (m *machine) appends() error {
	items, err := m.popMark()
	if err != nil {
		return err
	}
	return m.appendItems("APPENDS", items)
}

// appendItems appends items to the list on top of the stack.
func (m *machine) appendItems(op string, items []any) error {
	t, err := m.top()
	if err != nil {
		return err
	}
	l, ok := t.(*list)
	if !ok {
		return m.fail("%s on %T", op, t)
	}
	l.items = append(l.items, items...)
	return nil
}

// build handles BUILD: state set on an object. The only objects built here
// are dicts and tensors; their state holds Python attributes (an
// OrderedDict's _metadata of module versions), which is dropped.
func (m *machine) build() error {
	if _, err := m.pop(); err != nil {
		return err
	}
	t, err := m.top()
	if err != nil {
		return err
	}
	switch t.(type) {
	case *dict, *tensorRef:
		return nil
	}
	return m.fail("BUILD on %T", t)
}

func (m *machine) persID() error {
	pid, err := m.pop()
	if err != nil {
		return err
	}
	t, ok := pid.(tuple)
	if !ok || len(t) != 5 || t[0] != "storage" {
		return m.fail("persistent id is not a ('storage', type, key, location, numel) tuple")
	}
	g, ok := t[1].(global)
	if !ok {
		return m.fail("persistent id storage type is %T, not a global", t[1])
	}
	key, ok1 := t[2].(string)
	loc, ok2 := t[3].(string)
	numel, ok3 := t[4].(int64)
	if !ok1 || !ok2 || !ok3 || numel < 0 {
		return m.fail("persistent id fields have the wrong types")
	}
	return m.push(&storageRef{class: g.name, key: key, location: loc, numel: numel})
}
