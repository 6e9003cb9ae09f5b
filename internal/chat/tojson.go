package chat

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// maxJSONDepth bounds nesting in tojson so a self-referencing value fails
// instead of recursing forever.
const maxJSONDepth = 64

// filterToJSON is the tojson filter as Hugging Face's chat-template
// environment defines it: Python's json.dumps(x, ensure_ascii=False,
// indent=indent, sort_keys=sort_keys), whose default separators are ", " and
// ": " (",\n" between items when indenting). gonja's own tojson is Go's
// compact encoding with `'` escaped, which differs from what models saw in
// training.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		indent          *exec.Value
		sortKeys, ascii bool
	)
	if err := params.Take(
		exec.KeywordArgument("indent", exec.AsValue(nil), func(v *exec.Value) error { indent = v; return nil }),
		exec.KeywordArgument("sort_keys", exec.AsValue(false), exec.BoolArgument(&sortKeys)),
		exec.KeywordArgument("ensure_ascii", exec.AsValue(false), exec.BoolArgument(&ascii)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("tojson: %w", err)))
	}
	enc := jsonEncoder{sortKeys: sortKeys, ascii: ascii, indent: -1}
	if !indent.IsNil() {
		if !indent.IsInteger() {
			return exec.AsValue(exec.ErrInvalidCall(errors.New("tojson: indent must be an integer")))
		}
		enc.indent = max(indent.Integer(), 0)
	}
	if err := enc.value(in, 0); err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	return exec.AsSafeValue(enc.b.String())
}

type jsonEncoder struct {
	b        strings.Builder
	indent   int // -1: single line
	sortKeys bool
	ascii    bool
}

func (e *jsonEncoder) newline(depth int) {
	if e.indent >= 0 {
		e.b.WriteByte('\n')
		e.b.WriteString(strings.Repeat(" ", e.indent*depth))
	}
}

func (e *jsonEncoder) sep() {
	if e.indent >= 0 {
		e.b.WriteByte(',')
	} else {
		e.b.WriteString(", ")
	}
}

func (e *jsonEncoder) value(v *exec.Value, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("value nested too deeply")
	}
	switch {
	case v.IsNil():
		e.b.WriteString("null")
	case v.IsBool():
		e.b.WriteString(strconv.FormatBool(v.Bool()))
	case v.IsInteger():
		e.b.WriteString(strconv.Itoa(v.Integer()))
	case v.IsFloat():
		e.b.WriteString(pyFloat(v.Float()))
	case v.IsString():
		e.str(v.String())
	case v.IsList():
		return e.list(v, depth)
	case v.IsDict():
		return e.dict(v, depth)
	default:
		return fmt.Errorf("cannot encode %s", v.Val.Kind())
	}
	return nil
}

func (e *jsonEncoder) list(v *exec.Value, depth int) error {
	n := v.Len()
	if n == 0 {
		e.b.WriteString("[]")
		return nil
	}
	e.b.WriteByte('[')
	for i := range n {
		if i > 0 {
			e.sep()
		}
		e.newline(depth + 1)
		if err := e.value(v.Index(i), depth+1); err != nil {
			return err
		}
	}
	e.newline(depth)
	e.b.WriteByte(']')
	return nil
}

// dictPairs returns a mapping's pairs: a dict literal's in insertion order,
// a Go map's (which has no order) sorted by key.
func dictPairs(v *exec.Value) []*exec.Pair {
	switch d := v.Interface().(type) {
	case exec.Dict:
		return d.Pairs
	case *exec.Dict:
		return d.Pairs
	}
	pairs := v.Items()
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Key.String() < pairs[j].Key.String() })
	return pairs
}

func (e *jsonEncoder) dict(v *exec.Value, depth int) error {
	pairs := dictPairs(v)
	if e.sortKeys {
		pairs = append([]*exec.Pair(nil), pairs...)
		sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].Key.String() < pairs[j].Key.String() })
	}
	if len(pairs) == 0 {
		e.b.WriteString("{}")
		return nil
	}
	e.b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			e.sep()
		}
		e.newline(depth + 1)
		e.str(p.Key.String())
		e.b.WriteString(": ")
		if err := e.value(p.Value, depth+1); err != nil {
			return err
		}
	}
	e.newline(depth)
	e.b.WriteByte('}')
	return nil
}

// str writes s as Python's json module does.
func (e *jsonEncoder) str(s string) {
	e.b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			e.b.WriteString(`\"`)
		case '\\':
			e.b.WriteString(`\\`)
		case '\n':
			e.b.WriteString(`\n`)
		case '\r':
			e.b.WriteString(`\r`)
		case '\t':
			e.b.WriteString(`\t`)
		case '\b':
			e.b.WriteString(`\b`)
		case '\f':
			e.b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (e.ascii && r > 0x7e && r <= 0xffff):
				fmt.Fprintf(&e.b, `\u%04x`, r)
			case e.ascii && r > 0xffff:
				a, b := utf16.EncodeRune(r)
				fmt.Fprintf(&e.b, `\u%04x\u%04x`, a, b)
			default:
				e.b.WriteRune(r)
			}
		}
	}
	e.b.WriteByte('"')
}

// pyFloat formats f as Python's repr(float) does: the shortest digits that
// round-trip, positional for exponents -4..15, else d.ddde±XX.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	i := strings.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	if exp < -4 || exp >= 16 {
		pow := e[i+2:]
		if len(pow) < 2 {
			pow = "0" + pow
		}
		return e[:i] + "e" + e[i+1:i+2] + pow
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
