// Package constrain keeps generated text to a format by masking logits:
// a JSON recognizer that knows, after any prefix, which bytes may come
// next and the shortest way to finish, and a Mask that applies it to a
// vocabulary's tokens at each step.
package constrain

import "strings"

type state uint8

const (
	sValue     state = iota // a value is expected
	sArrFirst               // after '[': a value or ']'
	sObjFirst               // after '{': a key or '}'
	sObjKey                 // after ',' in an object: a key
	sKey                    // in a key string
	sKeyEsc                 // after '\' in a key
	sKeyU                   // in a key's \uXXXX
	sColon                  // after a key: ':'
	sStr                    // in a string value
	sStrEsc                 // after '\' in a string
	sStrU                   // in a string's \uXXXX
	sNumMinus               // after '-'
	sNumZero                // after a leading 0
	sNumInt                 // in the integer digits
	sFracStart              // after '.'
	sFrac                   // in the fraction digits
	sExpStart               // after 'e'
	sExpSign                // after 'e+' or 'e-'
	sExp                    // in the exponent digits
	sLit                    // in true, false or null
	sAfter                  // after a value in a container: ',' or the closer
	sDone                   // the value is complete
)

// Limits that keep every output finishable in a few bytes.
const (
	// MaxDepth is the deepest nesting of objects and arrays.
	MaxDepth = 16
	// MaxSpace is the most whitespace bytes in a row between tokens.
	MaxSpace = 2
)

// JSON recognizes the prefixes of one JSON value (RFC 8259), with
// whitespace runs limited to MaxSpace bytes and nesting to MaxDepth. The
// zero value is not ready: use NewJSON.
type JSON struct {
	st         state
	stack      []byte // 'o' or 'a', innermost last
	lit        string // the literal in progress
	li         int    // bytes of lit matched
	hex        int    // hex digits of a \u escape seen
	ws         int    // whitespace bytes in a row
	objectOnly bool
	started    bool
	scratch    *JSON
}

// NewJSON returns a recognizer of any JSON value, or of a JSON object
// only when objectOnly is set.
func NewJSON(objectOnly bool) *JSON { return &JSON{objectOnly: objectOnly} }

// Done reports whether the bytes so far are a complete value.
func (j *JSON) Done() bool {
	if j.st == sDone {
		return true
	}
	if len(j.stack) == 0 && j.started {
		switch j.st {
		case sNumZero, sNumInt, sFrac, sExp:
			return true
		}
	}
	return false
}

// Feed advances over b; it returns false, leaving j in an undefined
// state, if b cannot follow what came before.
func (j *JSON) Feed(b []byte) bool {
	for _, c := range b {
		if !j.step(c) {
			return false
		}
	}
	return true
}

// Accepts reports whether b can follow, leaving j unchanged; scratch is
// reused to copy the stack (pass the same one each time).
func (j *JSON) Accepts(b []byte, scratch *JSON) bool {
	stack := append(scratch.stack[:0], j.stack...)
	*scratch = *j
	scratch.stack, scratch.scratch = stack, nil
	return scratch.Feed(b)
}

// Try reports whether b can follow, leaving j unchanged, and when
// closing is set the length of the shortest completion after b.
func (j *JSON) Try(b []byte, closing bool) (int, bool) {
	if j.scratch == nil {
		j.scratch = &JSON{}
	}
	if !j.Accepts(b, j.scratch) {
		return 0, false
	}
	if !closing {
		return 0, true
	}
	return j.scratch.ClosingLen(), true
}

// Growth is the most one byte can add to ClosingLen.
func (j *JSON) Growth() int { return 8 }

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (j *JSON) space() bool {
	j.ws++
	return j.ws <= MaxSpace
}

func (j *JSON) step(c byte) bool {
	if !isSpace(c) {
		j.ws = 0
	}
	for {
		switch j.st {
		case sValue, sArrFirst:
			if isSpace(c) {
				return j.space()
			}
			if j.st == sArrFirst && c == ']' {
				return j.close('a')
			}
			return j.startValue(c)
		case sObjFirst, sObjKey:
			if isSpace(c) {
				return j.space()
			}
			if c == '}' && j.st == sObjFirst {
				return j.close('o')
			}
			if c == '"' {
				j.st = sKey
				return true
			}
			return false
		case sKey, sStr:
			switch {
			case c == '"':
				if j.st == sKey {
					j.st = sColon
					return true
				}
				j.endValue()
				return true
			case c == '\\':
				j.st++ // sKeyEsc or sStrEsc
				return true
			case c < 0x20:
				return false
			}
			return true
		case sKeyEsc, sStrEsc:
			if c == 'u' {
				j.st++ // sKeyU or sStrU
				j.hex = 0
				return true
			}
			if strings.IndexByte(`"\/bfnrt`, c) < 0 {
				return false
			}
			j.st--
			return true
		case sKeyU, sStrU:
			if !isHex(c) {
				return false
			}
			if j.hex++; j.hex == 4 {
				j.st -= 2
			}
			return true
		case sColon:
			if isSpace(c) {
				return j.space()
			}
			if c != ':' {
				return false
			}
			j.st = sValue
			return true
		case sNumMinus:
			switch {
			case c == '0':
				j.st = sNumZero
			case c >= '1' && c <= '9':
				j.st = sNumInt
			default:
				return false
			}
			return true
		case sNumZero, sNumInt, sFrac, sExp:
			switch {
			case c >= '0' && c <= '9' && j.st != sNumZero:
				return true
			case c == '.' && (j.st == sNumZero || j.st == sNumInt):
				j.st = sFracStart
				return true
			case (c == 'e' || c == 'E') && j.st != sExp:
				j.st = sExpStart
				return true
			}
			if len(j.stack) == 0 {
				// a top-level number is complete: only whitespace may follow
				j.st = sDone
			} else {
				j.endValue()
			}
			continue // c is the byte after the number
		case sFracStart, sExpStart, sExpSign:
			next, ok := numberPartStep(j.st, c)
			j.st = next
			return ok
		case sLit:
			if c != j.lit[j.li] {
				return false
			}
			if j.li++; j.li == len(j.lit) {
				j.endValue()
			}
			return true
		case sAfter:
			if isSpace(c) {
				return j.space()
			}
			top := j.stack[len(j.stack)-1]
			switch {
			case c == ',' && top == 'o':
				j.st = sObjKey
				return true
			case c == ',' && top == 'a':
				j.st = sValue
				return true
			case c == '}' || c == ']':
				return j.close(map[byte]byte{'}': 'o', ']': 'a'}[c])
			}
			return false
		case sDone:
			return isSpace(c) && j.space()
		}
		return false
	}
}

func (j *JSON) startValue(c byte) bool {
	if j.objectOnly && !j.started && c != '{' {
		return false
	}
	j.started = true
	switch {
	case c == '{' || c == '[':
		if len(j.stack) >= MaxDepth {
			return false
		}
		if c == '{' {
			j.stack = append(j.stack, 'o')
			j.st = sObjFirst
		} else {
			j.stack = append(j.stack, 'a')
			j.st = sArrFirst
		}
	case c == '"':
		j.st = sStr
	case c == '-':
		j.st = sNumMinus
	case c == '0':
		j.st = sNumZero
	case c >= '1' && c <= '9':
		j.st = sNumInt
	case c == 't' || c == 'f' || c == 'n':
		j.lit = map[byte]string{'t': "true", 'f': "false", 'n': "null"}[c]
		j.li = 1
		j.st = sLit
	default:
		return false
	}
	return true
}

func (j *JSON) close(kind byte) bool {
	if len(j.stack) == 0 || j.stack[len(j.stack)-1] != kind {
		return false
	}
	j.stack = j.stack[:len(j.stack)-1]
	j.endValue()
	return true
}

func (j *JSON) endValue() {
	if len(j.stack) == 0 {
		j.st = sDone
	} else {
		j.st = sAfter
	}
}

// ClosingLen is len(j.Closing()), without building it.
func (j *JSON) ClosingLen() int {
	n := len(j.stack)
	switch j.st {
	case sValue:
		if j.objectOnly && !j.started {
			return 2
		}
		n++
	case sObjKey:
		n += 4
	case sKey:
		n += 3
	case sKeyEsc:
		n += 4
	case sKeyU:
		n += 4 - j.hex + 3
	case sColon:
		n += 2
	case sStr:
		n++
	case sStrEsc:
		n += 2
	case sStrU:
		n += 4 - j.hex + 1
	case sNumMinus, sFracStart, sExpStart, sExpSign:
		n++
	case sLit:
		n += len(j.lit) - j.li
	}
	return n
}

// Closing returns the shortest bytes that complete the value.
func (j *JSON) Closing() string {
	var head string
	switch j.st {
	case sValue:
		if j.objectOnly && !j.started {
			return "{}"
		}
		head = "0"
	case sObjKey:
		head = `"":0`
	case sKey:
		head = `":0`
	case sKeyEsc:
		head = `n":0`
	case sKeyU:
		head = strings.Repeat("0", 4-j.hex) + `":0`
	case sColon:
		head = ":0"
	case sStr:
		head = `"`
	case sStrEsc:
		head = `n"`
	case sStrU:
		head = strings.Repeat("0", 4-j.hex) + `"`
	case sNumMinus, sFracStart, sExpStart, sExpSign:
		head = "0"
	case sLit:
		head = j.lit[j.li:]
	}
	var b strings.Builder
	b.WriteString(head)
	for i := len(j.stack) - 1; i >= 0; i-- {
		if j.stack[i] == 'o' {
			b.WriteByte('}')
		} else {
			b.WriteByte(']')
		}
	}
	return b.String()
}

// numberPartStep is the step of a number from the states that need a
// digit or a sign next (after '.', 'e', or 'e+'/'e-'): the state after c,
// and whether c is allowed (the state is unchanged when it is not).
func numberPartStep(st state, c byte) (state, bool) {
	digit := c >= '0' && c <= '9'
	switch st {
	case sFracStart:
		if digit {
			return sFrac, true
		}
	case sExpStart:
		if c == '+' || c == '-' {
			return sExpSign, true
		}
		if digit {
			return sExp, true
		}
	case sExpSign:
		if digit {
			return sExp, true
		}
	}
	return st, false
}
