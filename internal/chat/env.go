package chat

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// newConfig returns the lexer/parser settings of Hugging Face's
// chat-template environment: trim_blocks and lstrip_blocks on, a single
// trailing newline dropped.
func newConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	return c
}

// environment is shared by all templates; it is never modified after
// construction. Per-render globals (raise_exception, strftime_now) go into
// the render context instead.
var environment = sync.OnceValue(func() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	if err := filters.Replace("tojson", filterToJSON); err != nil {
		panic(fmt.Sprintf("chat: gonja lost its tojson filter: %v", err)) // broken invariant
	}
	if err := filters.Replace("items", filterItems); err != nil {
		panic(fmt.Sprintf("chat: gonja lost its items filter: %v", err)) // broken invariant
	}
	if err := filters.Replace("trim", filterTrim); err != nil {
		panic(fmt.Sprintf("chat: gonja lost its trim filter: %v", err)) // broken invariant
	}
	for _, name := range filterNames {
		if fn, ok := filters.Get(name); ok {
			if err := filters.Replace(name, guardFilter(name, fn)); err != nil {
				panic(fmt.Sprintf("chat: gonja filter %s: %v", name, err)) // broken invariant
			}
		}
	}
	methods := builtins.Methods
	methods.Str = strMethods(methods.Str)
	methods.Dict = dictMethods(methods.Dict)
	return &exec.Environment{
		Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables),
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: controlStructureSet(),
		Methods:           methods,
	}
})

// strNames lists the string methods gonja implements; strMethods keeps them.
var strNames = []string{
	"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith",
	"expandtabs", "find", "format", "format_map", "isalnum", "isalpha", "isascii",
	"isdecimal", "isdigit", "islower", "isnumeric", "isprintable", "isspace",
	"istitle", "isupper", "join", "ljust", "lower", "partition", "removeprefix",
	"removesuffix", "replace", "rfind", "rjust", "rpartition", "rsplit", "split",
	"splitlines", "startswith", "swapcase", "title", "upper", "zfill",
}

// strMethods returns gonja's string methods with strip, lstrip and rstrip
// replaced: gonja's lstrip()/rstrip() without an argument strip only
// spaces (Python strips all whitespace), and a multi-byte character in the
// argument cuts the string inside that character.
func strMethods(base *exec.MethodSet[string]) *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range strNames {
		if fn, ok := base.Get(name); ok {
			m[name] = fn
		}
	}
	m["strip"] = stripMethod(true, true)
	m["lstrip"] = stripMethod(true, false)
	m["rstrip"] = stripMethod(false, true)
	for name, fn := range m {
		m[name] = guardMethod(name, fn)
	}
	return exec.NewMethodSet(m)
}

// dictNames lists the mapping methods gonja implements; dictMethods keeps
// them.
var dictNames = []string{"get", "pop", "setdefault", "update", "copy", "clear"}

// dictMethods returns gonja's mapping methods with items, keys and values
// replaced: gonja's sort the keys, Python's keep a mapping's order (that
// of a client's JSON, which a template writes its tools' fields in).
func dictMethods(base *exec.MethodSet[map[string]any]) *exec.MethodSet[map[string]any] {
	m := map[string]exec.Method[map[string]any]{}
	for _, name := range dictNames {
		if fn, ok := base.Get(name); ok {
			m[name] = fn
		}
	}
	ordered := func(name string, pick func(p *exec.Pair) any) exec.Method[map[string]any] {
		return func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
			if err := args.Take(); err != nil {
				return nil, exec.ErrInvalidCall(fmt.Errorf("%s: %w", name, err))
			}
			pairs := dictPairs(self)
			out := make([]any, len(pairs))
			for i, p := range pairs {
				out[i] = pick(p)
			}
			return out, nil
		}
	}
	m["items"] = ordered("items", func(p *exec.Pair) any { return []any{p.Key.Interface(), p.Value.Interface()} })
	m["keys"] = ordered("keys", func(p *exec.Pair) any { return p.Key.Interface() })
	m["values"] = ordered("values", func(p *exec.Pair) any { return p.Value.Interface() })
	return exec.NewMethodSet(m)
}

func stripMethod(left, right bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		var chars *exec.Value
		if err := args.Take(exec.PositionalArgument("chars", exec.AsValue(nil), func(v *exec.Value) error {
			chars = v
			return nil
		})); err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		cut := pyIsSpace
		if !chars.IsNil() {
			if !chars.IsString() {
				return nil, exec.ErrInvalidCall(errors.New("strip argument must be a string or none"))
			}
			set := chars.String()
			cut = func(r rune) bool { return strings.ContainsRune(set, r) }
		}
		if left {
			self = strings.TrimLeftFunc(self, cut)
		}
		if right {
			self = strings.TrimRightFunc(self, cut)
		}
		return self, nil
	}
}

// filterTrim is Jinja's trim(value, chars=None): Python's str.strip. gonja's
// version fails on non-string input, where Jinja first converts it to a
// string.
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var chars *exec.Value
	if err := params.Take(exec.PositionalArgument("chars", exec.AsValue(nil), func(v *exec.Value) error {
		chars = v
		return nil
	})); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("trim: %w", err)))
	}
	s := in.String()
	if chars.IsNil() {
		return exec.AsValue(strings.TrimFunc(s, pyIsSpace))
	}
	set := chars.String()
	return exec.AsValue(strings.Trim(s, set))
}

// filterItems is Jinja's items: the (key, value) pairs of a mapping, in
// insertion order for a dict literal and key order for a Go map (which has
// no insertion order). gonja's version returns nothing for dict literals.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("items: %w", err)))
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if !in.IsDict() {
		return exec.AsValue(exec.ErrInvalidCall(errors.New("items: not a mapping")))
	}
	pairs := dictPairs(in)
	out := make([]any, len(pairs))
	for i, p := range pairs {
		out[i] = []any{p.Key.Interface(), p.Value.Interface()}
	}
	return exec.AsValue(out)
}

// pyIsSpace reports whether Python's str.isspace treats r as whitespace.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// sourceLoader serves the one template source and refuses every other
// name, so {% include %}, {% import %} and {% extends %} in a downloaded
// template cannot read local files.
type sourceLoader struct {
	name, src string
}

// Read returns the template source for its own name only.
func (l *sourceLoader) Read(name string) (io.Reader, error) {
	if _, err := l.Resolve(name); err != nil {
		return nil, err
	}
	return strings.NewReader(l.src), nil
}

// Resolve accepts only the template's own name.
func (l *sourceLoader) Resolve(name string) (string, error) {
	if name != l.name {
		return "", fmt.Errorf("chat templates cannot load other templates (%q)", name)
	}
	return name, nil
}

// Inherit returns the loader itself.
func (l *sourceLoader) Inherit(string) (loaders.Loader, error) { return l, nil }
