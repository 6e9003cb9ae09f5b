package chat

import (
	"fmt"
	"io"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
	"github.com/nikolalohinski/gonja/v2/utils"

	"github.com/aotlm/aotlm/internal/limits"
)

// A chat template is code from whoever published the model. gonja has no
// limits of its own, so a render runs under a budget (see package limits):
//
//   - the source is at most limits.MaxTemplateSource bytes and nests
//     brackets and blocks at most limits.MaxTemplateDepth deep, so parsing
//     cannot overflow the stack;
//   - macro calls nest at most limits.MaxTemplateDepth deep (a recursive
//     macro would otherwise end in Go's fatal stack overflow);
//   - loops iterate at most limits.MaxTemplateIterations times in all, each
//     loop charged its length when it starts, and range() is a list of at
//     most that many numbers (gonja's range is an unbounded generator);
//   - every string the template builds with *, + and ~, and every filter's
//     and string method's input and result, stay within
//     limits.MaxTemplateOutput, checked before allocating (the widths and
//     precisions of a format string count, and the arguments a field
//     repeats); a list built with + holds at most
//     limits.MaxTemplateIterations elements;
//   - lipsum() is charged its words as loop iterations and output, and the
//     counts of slice and batch as loop iterations, before they run;
//   - the bytes written, macro bodies included, stay within
//     limits.MaxTemplateOutput;
//   - the render stops after limits.MaxTemplateTime.
//
// Parsing rewrites the template's syntax tree so the checks run inside the
// evaluation: the operators *, + and ~ become calls of guard functions, the
// iterable of each for loop passes through a guard that charges its length,
// and each text or expression output writes through a counting writer.
// {% include %}, {% import %}, {% from %}, {% extends %} and {% block %}
// are refused: a template including itself recurses without end.

// Names of the guard functions and of the budget in a render's context. A
// template that names them is refused, so it cannot replace them.
const (
	reservedPrefix = "__aotlm_"
	budgetVar      = reservedPrefix + "budget"
	mulFunc        = reservedPrefix + "mul"
	addFunc        = reservedPrefix + "add"
	concatFunc     = reservedPrefix + "concat"
	iterFunc       = reservedPrefix + "iter"
)

// budget is one render's consumption of the limits.
type budget struct {
	deadline   time.Time
	iterations int
	written    int64
	depth      int
	err        error // the first limit reached
}

// renderTime is limits.MaxTemplateTime; fuzzing lowers it.
var renderTime = limits.MaxTemplateTime

func newBudget() *budget { return &budget{deadline: time.Now().Add(renderTime)} }

// fail records and returns a limit error.
func (b *budget) fail(what, limit string) error {
	if b.err == nil {
		b.err = &limits.Error{What: what, Limit: limit}
	}
	return b.err
}

// check fails once the render is over time, or after an earlier failure.
func (b *budget) check() error {
	if b.err != nil {
		return b.err
	}
	if time.Now().After(b.deadline) {
		return b.fail("the render", fmt.Sprintf("MaxTemplateTime (%v)", renderTime))
	}
	return nil
}

// size refuses a value of n bytes or elements.
func (b *budget) size(what string, n int64) error {
	if err := b.check(); err != nil {
		return err
	}
	if n < 0 || n > limits.MaxTemplateOutput {
		return b.fail(what, fmt.Sprintf("MaxTemplateOutput (%s)", limits.Bytes(limits.MaxTemplateOutput)))
	}
	return nil
}

// iterate charges n loop iterations.
func (b *budget) iterate(n int) error {
	if err := b.check(); err != nil {
		return err
	}
	b.iterations += n
	if n < 0 || b.iterations > limits.MaxTemplateIterations {
		return b.fail("the loop iterations of the render", fmt.Sprintf("MaxTemplateIterations (%d)", limits.MaxTemplateIterations))
	}
	return nil
}

// budgetOf finds the render's budget in a context.
func budgetOf(ctx *exec.Context) *budget {
	if v, ok := ctx.Get(budgetVar); ok {
		if b, ok := v.(*budget); ok {
			return b
		}
	}
	// not rendering through Template.Render: a fresh budget still bounds
	// this call
	return newBudget()
}

// budgetAbort carries a limit error out of gonja to Render.
type budgetAbort struct{ err error }

// countingWriter charges the bytes written to the budget before writing.
type countingWriter struct {
	w io.Writer
	b *budget
}

func (c countingWriter) Write(p []byte) (int, error) {
	c.b.written += int64(len(p))
	if err := c.b.size("the template's output", c.b.written); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// guardedNode writes a text or an expression output through a
// countingWriter.
type guardedNode struct {
	nodes.Node
}

func (g *guardedNode) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	b := budgetOf(r.Environment.Context)
	w := r.Output
	r.Output = countingWriter{w: w, b: b}
	defer func() { r.Output = w }()
	_, err := r.Visit(g.Node)
	return err
}

// boundedMacro defines a macro whose calls count towards the nesting limit.
type boundedMacro struct {
	*controlStructures.MacroControlStructure
}

func (m *boundedMacro) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	macro, err := exec.MacroNodeToFunc(m.Macro, r)
	if err != nil {
		return fmt.Errorf("macro %s: %w", m.Name, err)
	}
	name := m.Name
	r.Environment.Context.Set(name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		b := budgetOf(r.Environment.Context)
		if err := b.check(); err != nil {
			return exec.AsValue(err)
		}
		if b.depth >= limits.MaxTemplateDepth {
			return exec.AsValue(b.fail("the nesting of calls of macro "+name, fmt.Sprintf("MaxTemplateDepth (%d)", limits.MaxTemplateDepth)))
		}
		b.depth++
		defer func() { b.depth-- }()
		return macro(params)
	}))
	return nil
}

// controlStructureSet is gonja's control structures with macros bounded
// and the ones that load templates refused.
func controlStructureSet() *exec.ControlStructureSet {
	set := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(controlStructures.All)
	macro, ok := set.Get("macro")
	if !ok {
		panic("chat: gonja lost its macro tag") // broken invariant
	}
	must := func(err error) {
		if err != nil {
			panic(fmt.Sprintf("chat: gonja control structures: %v", err)) // broken invariant
		}
	}
	must(set.Replace("macro", func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := macro(p, args)
		if err != nil {
			return nil, err
		}
		m, ok := cs.(*controlStructures.MacroControlStructure)
		if !ok {
			return nil, fmt.Errorf("chat: unexpected macro node %T", cs)
		}
		return &boundedMacro{m}, nil
	}))
	for _, name := range []string{"include", "import", "from", "extends", "block"} {
		must(set.Replace(name, func(_ *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			return nil, args.Error(fmt.Sprintf("{%% %s %%} is not available in chat templates", name), nil)
		}))
	}
	return set
}

// checkSource refuses a source over limits.MaxTemplateSource, one naming
// the reserved guard names, and one nesting brackets or blocks deeper than
// limits.MaxTemplateDepth.
func checkSource(src string, cfg *config.Config) error {
	if len(src) > limits.MaxTemplateSource {
		return &limits.Error{What: fmt.Sprintf("the template source (%s)", limits.Bytes(int64(len(src)))),
			Limit: fmt.Sprintf("MaxTemplateSource (%s)", limits.Bytes(limits.MaxTemplateSource))}
	}
	if strings.Contains(src, reservedPrefix) {
		return fmt.Errorf("names starting with %s are reserved", reservedPrefix)
	}
	stream := tokens.LexAll(src, cfg)
	brackets, blocks := 0, 0
	afterBlockBegin := false
	for !stream.End() {
		t := stream.Next()
		switch t.Type {
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			brackets++
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			brackets = max(brackets-1, 0)
		case tokens.Name:
			if afterBlockBegin {
				switch {
				case strings.HasPrefix(t.Val, "end"):
					blocks = max(blocks-1, 0)
				case t.Val == "if" || t.Val == "for" || t.Val == "macro" || t.Val == "call" ||
					t.Val == "filter" || t.Val == "with" || t.Val == "set" || t.Val == "autoescape" || t.Val == "raw" || t.Val == "trans":
					blocks++
				}
			}
		}
		afterBlockBegin = t.Type == tokens.BlockBegin
		if brackets > limits.MaxTemplateDepth || blocks > limits.MaxTemplateDepth {
			return &limits.Error{What: fmt.Sprintf("the nesting of the template at line %d", t.Line),
				Limit: fmt.Sprintf("MaxTemplateDepth (%d)", limits.MaxTemplateDepth)}
		}
	}
	return nil
}

// guardTree rewrites a parsed template so its evaluation checks the
// budget: see the package comment above.
func guardTree(root *nodes.Template) {
	g := &treeGuard{seen: map[uintptr]bool{}}
	g.walk(reflect.ValueOf(root))
}

type treeGuard struct{ seen map[uintptr]bool }

// walk visits v (a pointer, or an addressable value) and its children,
// replacing guarded constructs in place.
func (g *treeGuard) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || g.seen[v.Pointer()] {
			return
		}
		g.seen[v.Pointer()] = true
		if f, ok := v.Interface().(*controlStructures.ForControlStructure); ok {
			g.walk(v.Elem())
			f.ObjectEvaluator = guardCall(iterFunc, f.ObjectEvaluator.Position(), f.ObjectEvaluator)
			return
		}
		g.walk(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		elem := v.Elem()
		g.walk(elem)
		if v.CanSet() {
			if r := g.replace(elem, v.Type()); r.IsValid() {
				v.Set(r)
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() && f.CanAddr() {
				// gonja keeps some expressions in unexported fields (the
				// value of {% set %}, the pairs of {% with %}, the chain of
				// {% filter %}); the tree is ours to rewrite before the
				// first render
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			if f.CanSet() {
				g.walk(f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			g.walk(v.Index(i))
		}
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.Interface && v.Type().Elem().Kind() != reflect.Pointer {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			g.walk(e)
			v.SetMapIndex(k, e)
		}
	}
}

// replace returns what stands for node in a field of type t, or an invalid
// Value to keep it.
func (g *treeGuard) replace(node reflect.Value, t reflect.Type) reflect.Value {
	var r any
	switch n := node.Interface().(type) {
	case *nodes.BinaryExpression:
		fn := ""
		switch n.Operator.Token.Type {
		case tokens.Multiply:
			fn = mulFunc
		case tokens.Addition:
			fn = addFunc
		case tokens.Tilde:
			fn = concatFunc
		default:
			return reflect.Value{}
		}
		r = guardCall(fn, n.Operator.Token, n.Left, n.Right)
	case *nodes.Data, *nodes.Output:
		r = &nodes.ControlStructureBlock{Location: n.(nodes.Node).Position(), Name: "output",
			ControlStructure: &guardedNode{n.(nodes.Node)}}
	default:
		return reflect.Value{}
	}
	if rv := reflect.ValueOf(r); rv.Type().AssignableTo(t) {
		return rv
	}
	return reflect.Value{}
}

// guardCall is the expression fn(args...), placed at pos for errors.
func guardCall(fn string, pos *tokens.Token, args ...nodes.Expression) *nodes.Call {
	name := &tokens.Token{Type: tokens.Name, Val: fn}
	if pos != nil {
		name.Line, name.Col, name.Pos = pos.Line, pos.Col, pos.Pos
	}
	return &nodes.Call{Location: name, Func: &nodes.Name{Name: name}, Args: args, Kwargs: map[string]nodes.Expression{}}
}

// guards returns the guard functions of a render with budget b.
func guards(b *budget) map[string]any {
	two := func(op string, fn func(l, r *exec.Value) (*exec.Value, error)) func(*exec.VarArgs) (*exec.Value, error) {
		return func(va *exec.VarArgs) (*exec.Value, error) {
			if err := b.check(); err != nil {
				return nil, err
			}
			if len(va.Args) != 2 {
				return nil, fmt.Errorf("%s takes two operands", op)
			}
			return fn(va.Args[0], va.Args[1])
		}
	}
	return map[string]any{
		budgetVar: b,
		mulFunc: two("*", func(l, r *exec.Value) (*exec.Value, error) {
			switch {
			case l.IsFloat() || r.IsFloat():
				return exec.AsValue(l.Float() * r.Float()), nil
			case l.IsString():
				s, n := l.String(), r.Integer()
				if n <= 0 {
					return exec.AsValue(""), nil
				}
				if len(s) > 0 && int64(n) > limits.MaxTemplateOutput/int64(len(s)) {
					return nil, b.fail(fmt.Sprintf("a string of %d times %d bytes", n, len(s)), fmt.Sprintf("MaxTemplateOutput (%s)", limits.Bytes(limits.MaxTemplateOutput)))
				}
				return exec.AsValue(strings.Repeat(s, n)), nil
			}
			return exec.AsValue(l.Integer() * r.Integer()), nil
		}),
		addFunc: two("+", func(l, r *exec.Value) (*exec.Value, error) {
			switch {
			case l.IsList():
				if !r.IsList() {
					return nil, fmt.Errorf("unable to concatenate a list and %s", r.String())
				}
				lv, rv := resolve(l.Val), resolve(r.Val)
				if n := lv.Len() + rv.Len(); n > limits.MaxTemplateIterations {
					return nil, b.fail(fmt.Sprintf("a list of %d elements", n), fmt.Sprintf("MaxTemplateIterations (%d)", limits.MaxTemplateIterations))
				}
				out := make([]any, 0, lv.Len()+rv.Len())
				for _, s := range []reflect.Value{lv, rv} {
					for i := range s.Len() {
						out = append(out, s.Index(i).Interface())
					}
				}
				return exec.AsValue(out), nil
			case l.IsFloat() || r.IsFloat():
				return exec.AsValue(l.Float() + r.Float()), nil
			case l.IsString() || r.IsString():
				return concat(b, l, r)
			}
			return exec.AsValue(l.Integer() + r.Integer()), nil
		}),
		concatFunc: two("~", func(l, r *exec.Value) (*exec.Value, error) { return concat(b, l, r) }),
		iterFunc: func(va *exec.VarArgs) (*exec.Value, error) {
			if len(va.Args) != 1 {
				return nil, fmt.Errorf("for: one iterable expected")
			}
			v := va.Args[0]
			n := 1
			if v.IsIterable() {
				n = resolve(v.Val).Len()
			}
			if err := b.iterate(n); err != nil {
				return nil, err
			}
			return v, nil
		},
		"range":  func(va *exec.VarArgs) (*exec.Value, error) { return boundedRange(b, va) },
		"lipsum": func(va *exec.VarArgs) (*exec.Value, error) { return boundedLipsum(b, va) },
	}
}

// lipsumWordBytes bounds the bytes of one word of lipsum's text (the
// longest word, a comma or full stop, a space and HTML markup per
// paragraph, shared out).
const lipsumWordBytes = 24

// boundedLipsum is Jinja's lipsum(n=5, html=True, min=20, max=100): n
// paragraphs of random words, charged as n*max words of loop iterations
// and output before it runs.
func boundedLipsum(b *budget, va *exec.VarArgs) (*exec.Value, error) {
	n, html, lo, hi := 5, true, 20, 100
	names := []string{"n", "html", "min", "max"}
	if len(va.Args) > len(names) {
		return nil, fmt.Errorf("lipsum: at most %d arguments", len(names))
	}
	given := maps.Clone(va.KwArgs)
	if given == nil {
		given = map[string]*exec.Value{}
	}
	for i, a := range va.Args {
		given[names[i]] = a
	}
	for k, v := range given {
		switch k {
		case "html":
			html = v.IsTrue()
		case "n", "min", "max":
			if !v.IsInteger() {
				return nil, fmt.Errorf("lipsum: %s must be an integer", k)
			}
			*map[string]*int{"n": &n, "min": &lo, "max": &hi}[k] = v.Integer()
		default:
			return nil, fmt.Errorf("lipsum: unknown argument %s", k)
		}
	}
	words := int64(max(n, 0)) * int64(max(hi-lo, 0))
	if n > limits.MaxTemplateIterations || hi-lo > limits.MaxTemplateIterations {
		words = limits.MaxTemplateIterations + 1
	}
	if err := b.iterate(int(words)); err != nil {
		return nil, err
	}
	if err := b.size(fmt.Sprintf("lipsum() of %d words", words), words*lipsumWordBytes); err != nil {
		return nil, err
	}
	return exec.AsSafeValue(utils.Lipsum(n, html, lo, hi)), nil
}

// concat joins two values as strings within the size limit.
func concat(b *budget, l, r *exec.Value) (*exec.Value, error) {
	ls, rs := l.String(), r.String()
	if err := b.size("a string", int64(len(ls))+int64(len(rs))); err != nil {
		return nil, err
	}
	return exec.AsValue(ls + rs), nil
}

// boundedRange is Python's range([start,] stop[, step]) as a list of at
// most limits.MaxTemplateIterations numbers.
func boundedRange(b *budget, va *exec.VarArgs) (*exec.Value, error) {
	start, stop, step := 0, 0, 1
	for _, a := range va.Args {
		if !a.IsInteger() {
			return nil, fmt.Errorf("range: arguments must be integers")
		}
	}
	switch len(va.Args) {
	case 1:
		stop = va.Args[0].Integer()
	case 2:
		start, stop = va.Args[0].Integer(), va.Args[1].Integer()
	case 3:
		start, stop, step = va.Args[0].Integer(), va.Args[1].Integer(), va.Args[2].Integer()
	default:
		return nil, fmt.Errorf("range: expected [start, ]stop[, step]")
	}
	if step == 0 {
		return nil, fmt.Errorf("range: step cannot be 0")
	}
	n := 0
	if step > 0 && stop > start {
		n = int((int64(stop) - int64(start) + int64(step) - 1) / int64(step))
	} else if step < 0 && stop < start {
		n = int((int64(start) - int64(stop) - int64(step) - 1) / -int64(step))
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	if n > limits.MaxTemplateIterations {
		return nil, b.fail(fmt.Sprintf("range() of %d numbers", n), fmt.Sprintf("MaxTemplateIterations (%d)", limits.MaxTemplateIterations))
	}
	out := make([]int, n)
	for i := range out {
		out[i] = start + i*step
	}
	return exec.AsValue(out), nil
}

// resolve follows pointers, interfaces and gonja Values to the value.
func resolve(v reflect.Value) reflect.Value {
	for v.IsValid() {
		if v.CanInterface() {
			switch x := v.Interface().(type) {
			case *exec.Value:
				if x == nil {
					return reflect.Value{}
				}
				v = x.Val
				continue
			case exec.Value:
				v = x.Val
				continue
			}
		}
		if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface {
			return v
		}
		v = v.Elem()
	}
	return v
}

// approxSize estimates the bytes of a value: strings by length, lists and
// dicts by the sizes of their elements, two levels down.
func approxSize(v reflect.Value, depth int) int64 {
	v = resolve(v)
	if !v.IsValid() {
		return 0
	}
	switch v.Kind() {
	case reflect.String:
		return int64(v.Len())
	case reflect.Slice, reflect.Array:
		n := int64(v.Len())
		if depth > 0 {
			for i := range v.Len() {
				n += approxSize(v.Index(i), depth-1)
				if n > limits.MaxTemplateOutput {
					return n
				}
			}
		}
		return n
	case reflect.Map:
		n := int64(v.Len())
		if depth > 0 {
			it := v.MapRange()
			for it.Next() {
				n += approxSize(it.Value(), depth-1) + approxSize(it.Key(), 0)
				if n > limits.MaxTemplateOutput {
					return n
				}
			}
		}
		return n
	}
	return 8
}

// resultEstimate bounds the size of what a filter or method makes from an
// input of in bytes (text, when the input is a string) and its arguments:
// widths count as bytes; replace, join, wordwrap and expandtabs can
// multiply the input by an argument, indent adds its width to every line,
// and format adds the widths and precisions of its format string and its
// arguments as often as the fields name them. The sum saturates above
// limits.MaxTemplateOutput instead of overflowing.
func resultEstimate(name string, in int64, text string, args []*exec.Value) int64 {
	const over = limits.MaxTemplateOutput + 1
	est, maxStr, maxInt, sumArgs, sumInts := in, int64(0), int64(0), int64(0), int64(0)
	for _, a := range args {
		if a.IsInteger() {
			n := min(max(int64(a.Integer()), 0), over)
			maxInt = max(maxInt, n)
			sumInts = min(sumInts+n, over)
			sumArgs = min(sumArgs+24, over) // the digits of any integer
		} else {
			s := min(approxSize(a.Val, 2), over)
			est = min(est+s, over)
			maxStr = max(maxStr, s)
			sumArgs = min(sumArgs+s, over)
			if n, err := strconv.ParseInt(strings.TrimSpace(a.String()), 10, 64); err == nil && n > 0 && a.IsString() {
				// a number spelled as a string may become a width too
				sumInts = min(sumInts+min(n, over), over)
			}
		}
	}
	// mul is a*b saturated at over.
	mul := func(a, b int64) int64 {
		if a > 0 && b > over/a {
			return over
		}
		return a * b
	}
	switch name {
	case "replace", "join", "wordwrap":
		return min(mul(in, maxStr+1)+est+maxInt, over)
	case "expandtabs":
		return min(mul(in, max(maxInt, 8))+maxInt, over)
	case "indent":
		lines := int64(strings.Count(text, "\n")) + 1
		return min(est+mul(lines, max(maxInt, maxStr)), over)
	case "format", "format_map":
		// the format filter is printf style (%5d), the string method
		// Python's ({:>5}): both readings are charged
		p, b := scanFormat(text, true), scanFormat(text, false)
		f := formatCost{widths: max(p.widths, b.widths), fields: max(p.fields, b.fields),
			named: max(p.named, b.named), argWidths: p.argWidths || b.argWidths}
		est = min(in+f.widths+sumArgs+mul(f.named, max(maxStr, 24)), over)
		if f.argWidths {
			est = min(est+mul(f.fields, sumInts), over)
		}
		return est
	}
	return min(est+maxInt, over)
}

// formatCost is what a format string can add to its output.
type formatCost struct {
	widths    int64 // the widths and precisions written in its fields
	fields    int64 // its replacement fields or conversions
	named     int64 // fields that name their argument (which may repeat)
	argWidths bool  // a width or precision taken from an argument
}

// scanFormat adds up the decimal numbers of every field of a format string
// (widths, precisions, and digits that only look like one: an overestimate
// is safe), counts its fields, and notes fields that name their argument
// or take a width from one. printf selects %-directives, else {}-fields.
func scanFormat(s string, printf bool) formatCost {
	const over = limits.MaxTemplateOutput + 1
	var c formatCost
	addNumber := func(digits string) {
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || n > over {
			n = over
		}
		c.widths = min(c.widths+n, over)
	}
	// numbers adds every run of digits in spec.
	numbers := func(spec string) {
		for i := 0; i < len(spec); {
			if spec[i] < '0' || spec[i] > '9' {
				i++
				continue
			}
			j := i
			for j < len(spec) && spec[j] >= '0' && spec[j] <= '9' {
				j++
			}
			addNumber(spec[i:j])
			i = j
		}
	}
	if printf {
		for i := 0; i < len(s); i++ {
			if s[i] != '%' {
				continue
			}
			j := i + 1
			for j < len(s) && strings.IndexByte("0123456789.+-# *[]()abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", s[j]) >= 0 &&
				!isVerb(s[j]) {
				j++
			}
			spec := s[i+1 : min(j, len(s))]
			if j < len(s) && s[j] == '%' && j == i+1 {
				i = j
				continue
			}
			c.fields++
			if strings.ContainsAny(spec, "[(") {
				c.named++
			}
			if strings.Contains(spec, "*") {
				c.argWidths = true
			}
			numbers(spec)
			i = j
		}
		return c
	}
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if depth == 0 && i+1 < len(s) && s[i+1] == '{' {
				i++ // an escaped brace
				continue
			}
			if depth == 0 {
				start = i + 1
				c.fields++
			} else {
				c.argWidths = true
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth == 0 {
				field := s[start:i]
				name, spec, _ := strings.Cut(field, ":")
				if name != "" {
					c.named++
				}
				numbers(spec)
			}
		}
	}
	return c
}

// isVerb reports whether c ends a printf directive.
func isVerb(c byte) bool {
	return strings.IndexByte("bcdeEfFgGoOpqsStTuvxX%", c) >= 0
}

// guardFilter checks a filter's input and arguments before it runs.
func guardFilter(name string, fn exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		b := budgetOf(e.Environment.Context)
		args := params.Args
		for _, v := range params.KwArgs {
			args = append(args, v)
		}
		if name == "slice" || name == "batch" {
			// their count argument is a number of lists made, or of
			// elements added to fill a row
			for _, a := range args {
				if a.IsInteger() {
					if err := b.iterate(max(a.Integer(), 0)); err != nil {
						return exec.AsValue(err)
					}
				}
			}
		}
		est := resultEstimate(name, approxSize(in.Val, 2), stringOf(in), args)
		if name == "tojson" {
			// each value starts a line indented by its depth times indent
			nodes, depth := jsonShape(in.Val, 0)
			for _, a := range args {
				if a.IsInteger() && a.Integer() > 0 {
					est = satAdd(est, satMul(satMul(nodes, depth), int64(a.Integer())))
				}
			}
		}
		if err := b.size("the result of filter "+name, est); err != nil {
			return exec.AsValue(err)
		}
		return fn(e, in, params)
	}
}

// satMul and satAdd are a*b and a+b for non-negative a and b, saturating
// just above limits.MaxTemplateOutput.
func satMul(a, b int64) int64 {
	const over = limits.MaxTemplateOutput + 1
	if a > 0 && b > over/a {
		return over
	}
	return min(a*b, over)
}

func satAdd(a, b int64) int64 { return min(a+b, limits.MaxTemplateOutput+1) }

// jsonShape counts the values of v (lists and dicts, their elements, and
// so on down) and the deepest nesting, stopping once either is past
// limits.MaxTemplateOutput.
func jsonShape(v reflect.Value, depth int64) (nodes, maxDepth int64) {
	v = resolve(v)
	nodes, maxDepth = 1, depth
	if !v.IsValid() || depth > limits.MaxTemplateDepth {
		return nodes, maxDepth
	}
	add := func(e reflect.Value) bool {
		n, d := jsonShape(e, depth+1)
		nodes, maxDepth = satAdd(nodes, n), max(maxDepth, d)
		return nodes <= limits.MaxTemplateOutput
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nodes, maxDepth
		}
		for i := range v.Len() {
			if !add(v.Index(i)) {
				break
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if !add(it.Value()) {
				break
			}
		}
	case reflect.Struct:
		if d, ok := v.Interface().(exec.Dict); ok {
			for _, p := range d.Pairs {
				if !add(reflect.ValueOf(p.Value)) {
					break
				}
			}
		}
	}
	return nodes, maxDepth
}

// stringOf is v's text when v is a string, else "".
func stringOf(v *exec.Value) string {
	if v.IsString() {
		return v.String()
	}
	return ""
}

// guardMethod checks a string method's input and arguments before it runs.
func guardMethod(name string, fn exec.Method[string]) exec.Method[string] {
	return func(self string, selfValue *exec.Value, params *exec.VarArgs) (any, error) {
		args := params.Args
		for _, v := range params.KwArgs {
			args = append(args, v)
		}
		if est := resultEstimate(name, int64(len(self)), self, args); est < 0 || est > limits.MaxTemplateOutput {
			// a method cannot reach the render's budget, and gonja flattens
			// the errors of methods into text: Render recovers this
			panic(budgetAbort{&limits.Error{What: "the result of string method " + name,
				Limit: fmt.Sprintf("MaxTemplateOutput (%s)", limits.Bytes(limits.MaxTemplateOutput))}})
		}
		return fn(self, selfValue, params)
	}
}

// filterNames are gonja's built-in filters (and ours); each is wrapped by
// guardFilter.
var filterNames = []string{"abs", "attr", "batch", "capitalize", "center", "default", "d", "dictsort",
	"e", "escape", "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent",
	"int", "join", "items", "last", "length", "count", "list", "lower", "map", "max", "min", "pprint",
	"random", "rejectattr", "reject", "replace", "reverse", "round", "safe", "selectattr", "select",
	"slice", "sort", "string", "striptags", "sum", "title", "tojson", "trim", "truncate", "unique",
	"upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"}
