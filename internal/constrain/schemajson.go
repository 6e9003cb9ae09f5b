package constrain

import (
	"sort"
	"strconv"
	"strings"
)

// sLits: matching one of a node's literal values (enum or const).
const sLits = sDone + 1

// SchemaJSON recognizes the prefixes of the JSON documents a Schema
// accepts (as Schema describes), with whitespace runs limited to
// MaxSpace bytes. Every prefix it accepts can be finished into a valid
// document: Closing returns the shortest such ending. Make one with
// NewSchemaJSON.
type SchemaJSON struct {
	s        *Schema
	st       state
	cur      *node   // the schema of the value expected or in progress
	stack    []frame // open objects and arrays, innermost last
	lo, hi   int     // sKey: the candidate properties; sLits: literals
	pos      int     // bytes of the key or literal matched
	exact    bool    // sLits: a number literal matches the bytes so far
	integer  bool    // the number in progress must be an integer
	lit      string  // the literal true, false or null in progress
	li       int
	hex      int
	hexv     int      // the value of the \u escape's digits so far
	sr       *strRule // the string in progress's rules
	chars    int      // its characters so far
	u8need   int      // continuation bytes its last character still needs
	u8lo     byte     // the range of the next continuation byte
	u8hi     byte
	nr       *numRule // the number in progress's bounds, or nil
	neg      bool     // it has a minus sign
	numv     int64    // the magnitude of its digits so far (when bounded)
	ndig     int      // its digits so far
	ws       int
	started  bool
	scratch  *SchemaJSON
	closeLen int // ClosingLen, when closeOK (kept for Try's fast path)
	closeOK  bool
}

// frame is an open object or array.
type frame struct {
	obj     *objRule // an object's rules, or nil
	arr     *arrRule // an array's rules, or nil
	seen    []uint64 // properties present (copied on write: frames are copied shallowly)
	nseen   int
	reqSeen int
	prop    int // the property whose value is in progress
	count   int // array items started
}

func (f *frame) isSeen(i int) bool {
	w := i >> 6
	return w < len(f.seen) && f.seen[w]>>(i&63)&1 != 0
}

func (f *frame) markSeen(i int) {
	s := make([]uint64, max(len(f.seen), i>>6+1))
	copy(s, f.seen)
	s[i>>6] |= 1 << (i & 63)
	f.seen = s
	f.nseen++
	if f.obj.props[i].req {
		f.reqSeen++
	}
}

// NewSchemaJSON returns a recognizer of the documents of s.
func NewSchemaJSON(s *Schema) *SchemaJSON { return &SchemaJSON{s: s, cur: s.root} }

// Done reports whether the bytes so far are a complete document.
func (r *SchemaJSON) Done() bool {
	if r.st == sDone {
		return true
	}
	if len(r.stack) == 0 && r.started {
		switch r.st {
		case sNumZero, sNumInt, sFrac, sExp:
			return r.nr == nil || r.nr.contains(r.value())
		case sLits:
			return r.exact
		}
	}
	return false
}

// Feed advances over b; it returns false, leaving r in an undefined
// state, if b cannot follow what came before.
func (r *SchemaJSON) Feed(b []byte) bool {
	r.closeOK = false
	for _, c := range b {
		if !r.step(c) {
			return false
		}
	}
	return true
}

// Try reports whether b can follow, leaving r unchanged, and when
// closing is set the length of the shortest completion after b.
func (r *SchemaJSON) Try(b []byte, closing bool) (int, bool) {
	if r.st == sStr && r.u8need == 0 && plainText(b) {
		// the common case, text inside a string, without a copy
		n := len(b)
		if r.sr.max >= 0 && r.chars+n > r.sr.max {
			return 0, false
		}
		if !closing {
			return 0, true
		}
		if !r.closeOK {
			r.closeLen, r.closeOK = r.ClosingLen(), true
		}
		return r.closeLen - min(n, max(0, r.sr.min-r.chars)), true
	}
	if r.scratch == nil {
		r.scratch = &SchemaJSON{}
	}
	sc := r.scratch
	stack := append(sc.stack[:0], r.stack...)
	*sc = *r
	sc.stack, sc.scratch = stack, nil
	if !sc.Feed(b) {
		return 0, false
	}
	if !closing {
		return 0, true
	}
	return sc.ClosingLen(), true
}

// narrow returns the range of the sorted strings in [lo, hi), which
// share their first pos bytes, whose byte at pos is c (-1, -1 if none).
func narrow(lo, hi, pos int, c byte, at func(int) string) (int, int) {
	// in the range, the string of length pos (if one) comes first, then
	// the others by their byte at pos
	first := lo + sort.Search(hi-lo, func(i int) bool {
		k := at(lo + i)
		return len(k) > pos && k[pos] >= c
	})
	last := lo + sort.Search(hi-lo, func(i int) bool {
		k := at(lo + i)
		return len(k) > pos && k[pos] > c
	})
	if first >= last {
		return -1, -1
	}
	return first, last
}

// plainText reports whether b is printable ASCII other than a quote or
// a backslash: bytes that go on a string and count a character each.
func plainText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Growth is the most one byte can add to ClosingLen.
func (r *SchemaJSON) Growth() int { return r.s.growth }

func (r *SchemaJSON) space() bool {
	r.ws++
	return r.ws <= MaxSpace
}

func (r *SchemaJSON) top() *frame { return &r.stack[len(r.stack)-1] }

func (r *SchemaJSON) endValue() {
	if len(r.stack) == 0 {
		r.st = sDone
	} else {
		r.st = sAfter
	}
}

func (r *SchemaJSON) pop() {
	r.stack = r.stack[:len(r.stack)-1]
	r.endValue()
}

func (r *SchemaJSON) step(c byte) bool {
	if !isSpace(c) {
		r.ws = 0
	}
	for {
		switch r.st {
		case sValue:
			if isSpace(c) {
				return r.space()
			}
			return r.startValue(c)
		case sArrFirst:
			if isSpace(c) {
				return r.space()
			}
			f := r.top()
			if c == ']' {
				if f.arr.min > 0 {
					return false
				}
				r.pop()
				return true
			}
			if f.arr.max == 0 {
				return false
			}
			f.count, r.cur = 1, f.arr.items
			return r.startValue(c)
		case sObjFirst, sObjKey:
			if isSpace(c) {
				return r.space()
			}
			f := r.top()
			if c == '}' && r.st == sObjFirst {
				if f.obj.nreq > 0 {
					return false
				}
				r.pop()
				return true
			}
			if c != '"' || f.nseen == len(f.obj.props) {
				return false
			}
			r.st, r.lo, r.hi, r.pos = sKey, 0, len(f.obj.props), 0
			return true
		case sKey:
			f := r.top()
			props := f.obj.props
			if c == '"' {
				for i := r.lo; i < r.hi; i++ {
					if len(props[i].key) == r.pos && !f.isSeen(i) {
						f.markSeen(i)
						f.prop, r.st = i, sColon
						return true
					}
				}
			}
			lo, hi := narrow(r.lo, r.hi, r.pos, c, func(i int) string { return props[i].key })
			ok := false
			for i := max(lo, 0); i < hi && !ok; i++ {
				ok = !f.isSeen(i)
			}
			if !ok {
				return false
			}
			r.lo, r.hi = lo, hi
			r.pos++
			return true
		case sColon:
			if isSpace(c) {
				return r.space()
			}
			if c != ':' {
				return false
			}
			f := r.top()
			r.st, r.cur = sValue, f.obj.props[f.prop].n
			return true
		case sStr:
			if r.u8need > 0 {
				if c < r.u8lo || c > r.u8hi {
					return false
				}
				r.u8need, r.u8lo, r.u8hi = r.u8need-1, 0x80, 0xbf
				return true
			}
			switch {
			case c == '"':
				if r.chars < r.sr.min {
					return false
				}
				r.endValue()
				return true
			case c < 0x20 || r.sr.max >= 0 && r.chars >= r.sr.max:
				return false
			case c == '\\':
				r.st = sStrEsc
			case c >= 0x80:
				need, lo, hi := utf8Lead(c)
				if need == 0 {
					return false
				}
				r.u8need, r.u8lo, r.u8hi = need, lo, hi
			}
			r.chars++
			return true
		case sStrEsc:
			if c == 'u' {
				r.st, r.hex, r.hexv = sStrU, 0, 0
				return true
			}
			if strings.IndexByte(`"\/bfnrt`, c) < 0 {
				return false
			}
			r.st = sStr
			return true
		case sStrU:
			if !isHex(c) {
				return false
			}
			r.hexv = r.hexv<<4 | hexValue(c)
			// a surrogate pair is one character, its two escapes two:
			// under a minimum length, counting them would be unsafe
			if r.hex++; r.hex == 2 && r.sr.min > 0 && r.hexv >= 0xd8 && r.hexv <= 0xdf {
				return false
			}
			if r.hex == 4 {
				r.st = sStr
			}
			return true
		case sNumMinus:
			switch {
			case c == '0' && r.nr == nil:
				r.st = sNumZero
			case c >= '1' && c <= '9':
				r.st = sNumInt
				return r.nr == nil || r.digit(c)
			default:
				return false
			}
			return true
		case sNumZero, sNumInt, sFrac, sExp:
			switch {
			case c >= '0' && c <= '9' && r.st != sNumZero:
				if r.nr != nil {
					return r.digit(c)
				}
				return true
			case c == '.' && !r.integer && (r.st == sNumZero || r.st == sNumInt):
				r.st = sFracStart
				return true
			case (c == 'e' || c == 'E') && !r.integer && r.st != sExp:
				r.st = sExpStart
				return true
			}
			if r.nr != nil && !r.nr.contains(r.value()) {
				return false
			}
			r.endValue()
			continue // c is the byte after the number
		case sFracStart, sExpStart, sExpSign:
			next, ok := numberPartStep(r.st, c)
			r.st = next
			return ok
		case sLit:
			if c != r.lit[r.li] {
				return false
			}
			if r.li++; r.li == len(r.lit) {
				r.endValue()
			}
			return true
		case sLits:
			lits := r.cur.lits
			lo, hi := narrow(r.lo, r.hi, r.pos, c, func(i int) string { return lits[i] })
			if lo < 0 {
				if !r.exact {
					return false
				}
				r.endValue()
				continue // c is the byte after a number
			}
			r.lo, r.hi, r.exact = lo, hi, false
			r.pos++
			if l := lits[lo]; len(l) == r.pos {
				// the shortest candidate sorts first; a number may go on
				if last := l[len(l)-1]; last >= '0' && last <= '9' {
					r.exact = true
				} else {
					r.endValue()
				}
			}
			return true
		case sAfter:
			if isSpace(c) {
				return r.space()
			}
			f := r.top()
			if f.obj != nil {
				switch {
				case c == ',' && f.nseen < len(f.obj.props):
					r.st = sObjKey
					return true
				case c == '}' && f.reqSeen == f.obj.nreq:
					r.pop()
					return true
				}
				return false
			}
			switch {
			case c == ',' && (f.arr.max < 0 || f.count < f.arr.max):
				f.count++
				r.st, r.cur = sValue, f.arr.items
				return true
			case c == ']' && f.count >= f.arr.min:
				r.pop()
				return true
			}
			return false
		case sDone:
			return isSpace(c) && r.space()
		}
		return false
	}
}

// utf8Lead returns how many continuation bytes follow the leading byte
// c of a UTF-8 character and the range of the first (need 0: c cannot
// lead).
func utf8Lead(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xc2 && c <= 0xdf:
		return 1, 0x80, 0xbf
	case c == 0xe0:
		return 2, 0xa0, 0xbf
	case c == 0xed:
		return 2, 0x80, 0x9f
	case c >= 0xe1 && c <= 0xef:
		return 2, 0x80, 0xbf
	case c == 0xf0:
		return 3, 0x90, 0xbf
	case c >= 0xf1 && c <= 0xf3:
		return 3, 0x80, 0xbf
	case c == 0xf4:
		return 3, 0x80, 0x8f
	}
	return 0, 0, 0
}

func hexValue(c byte) int {
	switch {
	case c <= '9':
		return int(c - '0')
	case c >= 'a':
		return int(c-'a') + 10
	}
	return int(c-'A') + 10
}

// byteKind is the type of a value that starts with c.
func byteKind(c byte) kind {
	switch {
	case c == '{':
		return kObject
	case c == '[':
		return kArray
	case c == '"':
		return kString
	case c == '-' || c >= '0' && c <= '9':
		return kNumber | kInteger
	case c == 't' || c == 'f':
		return kBool
	case c == 'n':
		return kNull
	}
	return 0
}

func (r *SchemaJSON) startValue(c byte) bool {
	n := r.cur
	k := byteKind(c)
	if k == 0 {
		return false
	}
	r.started = true
	if n.kinds&k == 0 {
		// one of the literals, if one starts with c
		r.st, r.lo, r.hi, r.pos, r.exact = sLits, 0, len(n.lits), 0, false
		return r.step(c)
	}
	switch c {
	case '{':
		r.stack = append(r.stack, frame{obj: n.obj})
		r.st = sObjFirst
	case '[':
		r.stack = append(r.stack, frame{arr: n.arr})
		r.st = sArrFirst
	case '"':
		r.st, r.sr, r.chars, r.u8need = sStr, n.str, 0, 0
	case 't', 'f', 'n':
		r.lit = map[byte]string{'t': "true", 'f': "false", 'n': "null"}[c]
		r.st, r.li = sLit, 1
	default:
		r.integer = n.kinds&kNumber == 0 || n.num != nil
		r.nr, r.neg, r.numv, r.ndig = n.num, c == '-', 0, 0
		switch c {
		case '-':
			r.st = sNumMinus
			return r.nr == nil || r.nr.lo < 0
		case '0':
			r.st, r.ndig = sNumZero, 1
			return r.nr == nil || r.nr.contains(0)
		}
		r.st = sNumInt
		return r.nr == nil || r.digit(c)
	}
	return true
}

// value is the bounded number in progress.
func (r *SchemaJSON) value() int64 {
	if r.neg {
		return -r.numv
	}
	return r.numv
}

// digit appends a digit to a bounded number, if some number in range
// still starts so.
func (r *SchemaJSON) digit(c byte) bool {
	if r.numv > maxBound {
		return false
	}
	r.numv = r.numv*10 + int64(c-'0')
	r.ndig++
	k, _ := r.nr.extend(r.neg, r.numv, r.ndig)
	return k >= 0
}

// extend finds the fewest digits (k) to append to a number with
// magnitude v (nd digits so far, 0 after a lone minus) that land in
// range, and the smallest magnitude so reached.
func (nr *numRule) extend(neg bool, v int64, nd int) (k int, a int64) {
	p := int64(1)
	for k = 0; k <= 17; k, p = k+1, p*10 {
		var lowA, highA int64
		switch {
		case nd == 0 && k == 0:
			continue
		case nd == 0:
			lowA, highA = p/10, p-1
		case v == 0 && k > 0:
			return -1, 0 // nothing follows a leading 0
		case v > 10*maxBound/p:
			return -1, 0 // past every bound
		default:
			lowA, highA = v*p, v*p+p-1
		}
		lo, hi := lowA, highA // the range of magnitudes allowed
		if neg {
			lo, hi = max(lo, -nr.hi), min(hi, -nr.lo)
		} else {
			lo, hi = max(lo, nr.lo), min(hi, nr.hi)
		}
		if lo <= hi {
			return k, lo
		}
	}
	return -1, 0
}

// closer counts or writes a completion.
type closer struct {
	n     int
	b     []byte
	write bool
}

func (w *closer) str(s string) {
	w.n += len(s)
	if w.write {
		w.b = append(w.b, s...)
	}
}

func (w *closer) kv(p *prop) {
	w.str(`"`)
	w.str(p.key)
	w.str(`":`)
	w.str(p.n.short)
}

// ClosingLen is len(r.Closing()), without building it.
func (r *SchemaJSON) ClosingLen() int {
	var w closer
	r.closing(&w)
	return w.n
}

// Closing returns the shortest bytes that complete a valid document.
func (r *SchemaJSON) Closing() string {
	w := closer{write: true}
	r.closing(&w)
	return string(w.b)
}

func (r *SchemaJSON) closing(w *closer) {
	skip := -1    // a property of the innermost object the head writes
	count := -1   // items of the innermost array after the head, if it writes one
	comma := true // whether the innermost object's next key needs a comma
	switch r.st {
	case sValue:
		w.str(r.cur.short)
	case sArrFirst:
		if a := r.top().arr; a.min > 0 {
			w.str(a.items.short)
			count = 1
		}
	case sObjFirst:
		comma = false
	case sObjKey:
		f := r.top()
		props := f.obj.props
		best := -1
		for i := range props {
			if f.isSeen(i) {
				continue
			}
			if props[i].req {
				best = i // it is written anyway
				break
			}
			if best < 0 || props[i].kvLen() < props[best].kvLen() {
				best = i
			}
		}
		if best >= 0 {
			w.kv(&props[best])
			skip = best
		}
	case sKey:
		f := r.top()
		props := f.obj.props
		best, bestCost := -1, 0
		for i := r.lo; i < r.hi; i++ {
			if f.isSeen(i) {
				continue
			}
			p := &props[i]
			cost := len(p.key) - r.pos + 2 + p.n.minLen
			if p.req {
				cost -= p.kvLen() + 1 // no longer missing
			}
			if best < 0 || cost < bestCost {
				best, bestCost = i, cost
			}
		}
		if best >= 0 {
			p := &props[best]
			w.str(p.key[r.pos:])
			w.str(`":`)
			w.str(p.n.short)
			skip = best
		}
	case sColon:
		f := r.top()
		w.str(":")
		w.str(f.obj.props[f.prop].n.short)
	case sStr, sStrEsc, sStrU:
		switch {
		case r.st == sStrEsc:
			w.str("n")
		case r.st == sStrU:
			w.str(strings.Repeat("0", 4-r.hex))
		case r.u8need > 0:
			w.str(string([]byte{r.u8lo}) + strings.Repeat("\x80", r.u8need-1))
		}
		if pad := r.sr.min - r.chars; pad > 0 {
			w.str(strings.Repeat("a", pad))
		}
		w.str(`"`)
	case sNumMinus, sNumZero, sNumInt:
		if r.nr == nil {
			if r.st == sNumMinus {
				w.str("0")
			}
			break
		}
		if k, a := r.nr.extend(r.neg, r.numv, r.ndig); k > 0 {
			d := strconv.FormatInt(a, 10)
			w.str(d[len(d)-k:]) // the digits after those typed
		}
	case sFracStart, sExpStart, sExpSign:
		w.str("0")
	case sLit:
		w.str(r.lit[r.li:])
	case sLits:
		if !r.exact {
			best := ""
			for _, l := range r.cur.lits[r.lo:r.hi] {
				if best == "" || len(l) < len(best) {
					best = l
				}
			}
			w.str(best[r.pos:])
		}
	}
	for i := len(r.stack) - 1; i >= 0; i-- {
		f := &r.stack[i]
		inner := i == len(r.stack)-1
		if f.obj != nil {
			first := inner && !comma
			for pi := range f.obj.props {
				p := &f.obj.props[pi]
				if !p.req || f.isSeen(pi) || inner && pi == skip {
					continue
				}
				if !first {
					w.str(",")
				}
				first = false
				w.kv(p)
			}
			w.str("}")
			continue
		}
		n := f.count
		if inner && count >= 0 {
			n = count
		}
		for ; n < f.arr.min; n++ {
			w.str(",")
			w.str(f.arr.items.short)
		}
		w.str("]")
	}
}
