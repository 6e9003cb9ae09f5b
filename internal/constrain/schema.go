package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Schema is a compiled JSON Schema: the subset that structured-output
// clients send (OpenAI's strict mode and a little more), ready to drive
// a SchemaJSON recognizer. It is immutable and safe to share.
//
// Supported: type (a name or a list), properties, required, items,
// minItems, maxItems, minLength, maxLength (in characters), minimum,
// maximum, exclusiveMinimum, exclusiveMaximum, enum, const, anyOf and
// oneOf whose alternatives take different JSON types (an enum or a type
// each), allOf of one schema, $ref to "#", "#/$defs/..." and
// "#/definitions/...", and the schemas true and {} (any value).
//
// The recognizer generates a subset of the documents the schema
// accepts, which is always safe:
//   - objects hold only the listed properties, whatever
//     additionalProperties says (absent, true, false or a schema): a
//     document without extra keys validates under all of them;
//   - keys, enum strings and const strings are written in their plain
//     JSON encoding (no needless \u escapes); other strings are free
//     but valid UTF-8;
//   - a bounded number is written as an integer in range (no -0);
//   - a schema without a type but with properties (items) is an object
//     (array) schema.
//
// Keywords that only describe (title, description, default, examples,
// format, $schema, $id, $comment, deprecated, ...) and unknown keywords
// are ignored, as JSON Schema validators do. Keywords that assert
// something this compiler cannot enforce (pattern, multipleOf,
// uniqueItems, not, if, ...) make CompileSchema fail with an error
// naming the keyword, so that a reply never breaks its schema.
type Schema struct {
	root   *node
	growth int // the most one byte can add to the shortest completion
}

// kind is a set of JSON value types.
type kind uint8

const (
	kObject kind = 1 << iota
	kArray
	kString
	kNumber
	kInteger
	kBool
	kNull

	kAll = kObject | kArray | kString | kNumber | kBool | kNull
)

var kindNames = map[string]kind{"object": kObject, "array": kArray, "string": kString, "number": kNumber,
	"integer": kInteger, "boolean": kBool, "null": kNull}

// node is one schema: the types it takes freely (kinds) and the literal
// values it takes besides (lits, for types not in kinds).
type node struct {
	kinds kind
	lits  []string // JSON texts, sorted
	obj   *objRule // the object rules, when kinds has kObject
	arr   *arrRule // the array rules, when kinds has kArray
	str   *strRule // the string rules, when kinds has kString
	num   *numRule // bounds of a number, or nil
	ready bool     // kinds, lits, obj and arr are set

	minLen int    // length of the shortest value
	short  string // the shortest value
	long   int    // the longest shortest value of one of its types or literals
}

type objRule struct {
	props []prop // sorted by key
	nreq  int
}

type prop struct {
	key string // JSON-encoded, without the quotes
	n   *node
	req bool
}

// kvLen is the length of `"key":shortest`.
func (p *prop) kvLen() int { return len(p.key) + 3 + p.n.minLen }

// strRule bounds a string's length in characters (code points).
type strRule struct {
	min, max int // max < 0: no limit
}

// strLen is the length of n's shortest string.
func (n *node) strLen() int { return 2 + n.str.min }

// numRule bounds a number; a bounded number is written as an integer
// (a subset of the numbers in range, which keeps prefixes decidable).
type numRule struct {
	lo, hi int64
}

// maxBound bounds the integers a numRule deals with (their magnitude
// stays far from int64 overflow).
const maxBound = 1e15

func (r *numRule) contains(x int64) bool { return r.lo <= x && x <= r.hi }

// shortest is the integer in range with the fewest characters.
func (r *numRule) shortest() int64 {
	switch {
	case r.contains(0):
		return 0
	case r.lo > 0:
		return r.lo
	}
	return r.hi
}

// numLen is the length of n's shortest number.
func (n *node) numLen() int {
	if n.num == nil {
		return 1
	}
	return len(strconv.FormatInt(n.num.shortest(), 10))
}

type arrRule struct {
	items    *node
	min, max int // max < 0: no limit
}

// SchemaError is a schema CompileSchema cannot use.
type SchemaError struct {
	Path    string // JSON pointer of the offending schema, "#/..."
	Keyword string // the keyword at fault, if one
	Msg     string
}

func (e *SchemaError) Error() string {
	if e.Keyword != "" {
		return fmt.Sprintf("schema %s: %s: %s", e.Path, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("schema %s: %s", e.Path, e.Msg)
}

// unsupported are the assertion keywords that are refused.
var unsupported = []string{
	"pattern", "multipleOf", "uniqueItems", "contains", "minContains", "maxContains", "prefixItems", "additionalItems",
	"unevaluatedItems", "unevaluatedProperties", "patternProperties", "propertyNames", "minProperties",
	"maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "not", "if", "then", "else",
	"$dynamicRef", "$recursiveRef",
}

// assertions are the keywords that constrain a value (the rest only
// describe it).
var assertions = append([]string{"type", "enum", "const", "properties", "required", "items", "minItems", "maxItems", "minLength", "maxLength",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"anyOf", "oneOf", "allOf", "$ref"}, unsupported...)

// Limits of a compiled schema.
const (
	// MaxShortest bounds the length of a schema's shortest document.
	MaxShortest = 1 << 14
	maxNodes    = 1 << 14
)

type compiler struct {
	doc   any
	refs  map[string]*node
	nodes []*node
	any   *node
}

// anyNode is the schema of any value (objects without keys: no
// properties are listed).
func (c *compiler) anyNode() *node {
	if c.any == nil {
		n := c.newNode()
		n.kinds, n.obj, n.ready = kAll, &objRule{}, true
		n.arr = &arrRule{items: n, max: -1}
		n.str = &strRule{max: -1}
		c.any = n
	}
	return c.any
}

// CompileSchema compiles a JSON Schema (see Schema for the subset).
func CompileSchema(raw []byte) (*Schema, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &SchemaError{Path: "#", Msg: "not JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &SchemaError{Path: "#", Msg: "text after the schema"}
	}
	c := &compiler{doc: doc, refs: map[string]*node{}}
	root := c.newNode()
	c.refs["#"] = root
	if err := c.compileInto(doc, "#", root); err != nil {
		return nil, err
	}
	if err := c.shortest(); err != nil {
		return nil, err
	}
	s := &Schema{root: root}
	long, key := 0, 0
	for _, n := range c.nodes {
		long = max(long, n.long)
		if n.obj != nil {
			for _, p := range n.obj.props {
				key = max(key, len(p.key))
			}
		}
	}
	s.growth = 2*long + key + 16
	return s, nil
}

func (c *compiler) newNode() *node {
	n := &node{}
	c.nodes = append(c.nodes, n)
	return n
}

// compile compiles a subschema into a new node.
func (c *compiler) compile(v any, path string) (*node, error) {
	if len(c.nodes) > maxNodes {
		return nil, &SchemaError{Path: path, Msg: fmt.Sprintf("more than %d subschemas", maxNodes)}
	}
	n := c.newNode()
	return n, c.compileInto(v, path, n)
}

func (c *compiler) compileInto(v any, path string, n *node) error {
	switch s := v.(type) {
	case bool:
		if !s {
			return &SchemaError{Path: path, Msg: "the schema false allows no value"}
		}
		return c.compileInto(map[string]any{}, path, n)
	case map[string]any:
		return c.compileObject(s, path, n)
	}
	return &SchemaError{Path: path, Msg: fmt.Sprintf("a schema is an object or a boolean, not %s", jsonKind(v))}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	}
	return "an object"
}

func (c *compiler) compileObject(s map[string]any, path string, n *node) error {
	for _, k := range unsupported {
		if _, ok := s[k]; ok {
			return &SchemaError{Path: path, Keyword: k, Msg: "not supported in constrained decoding (the reply could break it)"}
		}
	}
	// $ref, allOf, anyOf and oneOf stand alone
	for _, k := range []string{"$ref", "allOf", "anyOf", "oneOf"} {
		if _, ok := s[k]; !ok {
			continue
		}
		for _, o := range assertions {
			if _, ok := s[o]; ok && o != k {
				return &SchemaError{Path: path, Keyword: k, Msg: fmt.Sprintf("not supported next to %s", o)}
			}
		}
		switch k {
		case "$ref":
			return c.ref(s[k], path, n)
		case "allOf":
			alts, ok := s[k].([]any)
			if !ok || len(alts) != 1 {
				return &SchemaError{Path: path, Keyword: k, Msg: "only an allOf of one schema is supported"}
			}
			return c.compileInto(alts[0], path+"/allOf/0", n)
		default:
			return c.union(s[k], path+"/"+k, n)
		}
	}
	kinds := kind(0)
	if t, ok := s["type"]; ok {
		var names []any
		switch t := t.(type) {
		case string:
			names = []any{t}
		case []any:
			names = t
		}
		if len(names) == 0 {
			return &SchemaError{Path: path, Keyword: "type", Msg: "want a type name or a non-empty list of them"}
		}
		for _, nm := range names {
			str, _ := nm.(string)
			k, ok := kindNames[str]
			if !ok {
				return &SchemaError{Path: path, Keyword: "type", Msg: fmt.Sprintf("%v is not object, array, string, number, integer, boolean or null", nm)}
			}
			kinds |= k
		}
	}
	_, hasEnum := s["enum"]
	_, hasConst := s["const"]
	if hasEnum || hasConst {
		lits, err := literals(s, path, kinds)
		if err != nil {
			return err
		}
		n.lits = lits
	} else {
		if kinds == 0 {
			_, props := s["properties"]
			_, req := s["required"]
			_, items := s["items"]
			switch {
			case props || req:
				kinds = kObject
			case items:
				kinds = kArray
			default:
				kinds = kAll
			}
		}
		if kinds&kNumber != 0 {
			kinds &^= kInteger
		}
		n.kinds = kinds
		if kinds&kObject != 0 {
			n.obj = &objRule{}
		}
		if kinds&kArray != 0 {
			n.arr = &arrRule{max: -1}
		}
		if kinds&kString != 0 {
			n.str = &strRule{max: -1}
		}
	}
	n.ready = true
	if n.obj != nil {
		if err := c.object(s, path, n.obj); err != nil {
			return err
		}
	}
	if n.arr != nil {
		if err := c.array(s, path, n.arr); err != nil {
			return err
		}
	}
	if n.str != nil {
		var err error
		if n.str.min, n.str.max, err = bounds(s, path, "minLength", "maxLength"); err != nil {
			return err
		}
	}
	if n.kinds&(kNumber|kInteger) != 0 {
		var err error
		if n.num, err = numBounds(s, path); err != nil {
			return err
		}
	}
	if len(n.lits) > 0 {
		for _, k := range []string{"minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if _, ok := s[k]; ok {
				return &SchemaError{Path: path, Keyword: k, Msg: "not supported next to enum or const"}
			}
		}
	}
	return nil
}

// numBounds reads minimum, maximum, exclusiveMinimum and
// exclusiveMaximum into the range of integers they allow (nil: none).
func numBounds(s map[string]any, path string) (*numRule, error) {
	r := &numRule{lo: -maxBound, hi: maxBound}
	set := false
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		v, ok := s[k]
		if !ok {
			continue
		}
		num, _ := v.(json.Number)
		x, err := num.Float64()
		if err != nil || math.IsNaN(x) {
			return nil, &SchemaError{Path: path, Keyword: k, Msg: "want a number"}
		}
		x = max(-maxBound, min(maxBound, x))
		switch k {
		case "minimum":
			r.lo = max(r.lo, int64(math.Ceil(x)))
		case "maximum":
			r.hi = min(r.hi, int64(math.Floor(x)))
		case "exclusiveMinimum":
			r.lo = max(r.lo, int64(math.Floor(x))+1)
		case "exclusiveMaximum":
			r.hi = min(r.hi, int64(math.Ceil(x))-1)
		}
		set = true
	}
	if !set {
		return nil, nil
	}
	if r.lo > r.hi {
		return nil, &SchemaError{Path: path, Msg: "the bounds leave no integer (bounded numbers are written as integers)"}
	}
	return r, nil
}

// bounds reads a pair of count keywords such as minItems and maxItems
// (max -1 when absent).
func bounds(s map[string]any, path, lo, hi string) (int, int, error) {
	count := func(k string) (int, error) {
		v, ok := s[k]
		if !ok {
			return -1, nil
		}
		num, _ := v.(json.Number)
		i, err := num.Int64()
		if err != nil || i < 0 || i > MaxShortest {
			return 0, &SchemaError{Path: path, Keyword: k, Msg: fmt.Sprintf("want an integer in [0, %d]", MaxShortest)}
		}
		return int(i), nil
	}
	min, err := count(lo)
	if err != nil {
		return 0, 0, err
	}
	max, err := count(hi)
	if err != nil {
		return 0, 0, err
	}
	if min < 0 {
		min = 0
	}
	if max >= 0 && max < min {
		return 0, 0, &SchemaError{Path: path, Keyword: hi, Msg: "less than " + lo}
	}
	return min, max, nil
}

// encode writes v as JSON without HTML escapes.
func encode(v any) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

func litKind(l string) kind {
	switch l[0] {
	case '"':
		return kString
	case 't', 'f':
		return kBool
	case 'n':
		return kNull
	}
	if strings.ContainsAny(l, ".eE") {
		return kNumber
	}
	return kInteger
}

// literals reads enum and const into sorted JSON texts of the types
// allowed (all when kinds is 0).
func literals(s map[string]any, path string, kinds kind) ([]string, error) {
	var vals []any
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return nil, &SchemaError{Path: path, Keyword: "enum", Msg: "want a non-empty array"}
		}
		vals = list
	}
	if cv, ok := s["const"]; ok {
		if vals != nil && !slices.ContainsFunc(vals, func(v any) bool { return encode(v) == encode(cv) }) {
			return nil, &SchemaError{Path: path, Keyword: "const", Msg: "the const value is not in the enum"}
		}
		vals = []any{cv}
	}
	var lits []string
	for _, v := range vals {
		switch v.(type) {
		case map[string]any, []any:
			return nil, &SchemaError{Path: path, Keyword: "enum", Msg: "object and array values are not supported"}
		}
		l := encode(v)
		k := litKind(l)
		if kinds != 0 && kinds&k == 0 && !(k == kInteger && kinds&kNumber != 0) {
			continue // the type keyword excludes it
		}
		lits = append(lits, l)
	}
	if len(lits) == 0 {
		return nil, &SchemaError{Path: path, Keyword: "enum", Msg: "no value of the enum has the schema's type"}
	}
	slices.Sort(lits)
	return slices.Compact(lits), nil
}

func (c *compiler) ref(v any, path string, n *node) error {
	ref, ok := v.(string)
	if !ok {
		return &SchemaError{Path: path, Keyword: "$ref", Msg: "want a string"}
	}
	target, ok := c.refs[ref]
	if !ok {
		var sub any
		switch {
		case ref == "#":
			sub = c.doc
		case strings.HasPrefix(ref, "#/$defs/") || strings.HasPrefix(ref, "#/definitions/"):
			section, name, _ := strings.Cut(ref[2:], "/")
			name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
			defs, _ := c.doc.(map[string]any)[section].(map[string]any)
			if sub, ok = defs[name]; !ok {
				return &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q is not defined", ref)}
			}
		default:
			return &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: only #, #/$defs/... and #/definitions/... are supported", ref)}
		}
		target = c.newNode()
		c.refs[ref] = target
		if err := c.compileInto(sub, ref, target); err != nil {
			return err
		}
	}
	if !target.ready {
		return &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q refers to itself with no object or array in between", ref)}
	}
	*n = *target
	return nil
}

// union merges the alternatives of anyOf or oneOf, which must take
// different types (so at most one matches any value).
func (c *compiler) union(v any, path string, n *node) error {
	alts, ok := v.([]any)
	if !ok || len(alts) == 0 {
		return &SchemaError{Path: path, Msg: "want a non-empty array of schemas"}
	}
	var lits []string
	for i, a := range alts {
		an, err := c.compile(a, fmt.Sprintf("%s/%d", path, i))
		if err != nil {
			return err
		}
		if !an.ready {
			return &SchemaError{Path: path, Msg: "an alternative refers back to this schema with no object or array in between"}
		}
		ak := an.kinds
		if ak&kNumber != 0 {
			ak |= kInteger
		}
		nk := n.kinds
		if nk&kNumber != 0 {
			nk |= kInteger
		}
		if ak&nk != 0 {
			return &SchemaError{Path: fmt.Sprintf("%s/%d", path, i), Msg: "alternatives that take the same type are not supported"}
		}
		for _, l := range lits {
			if ak&litKind(l) != 0 || litKind(l) == kInteger && ak&kNumber != 0 {
				return &SchemaError{Path: fmt.Sprintf("%s/%d", path, i), Msg: "alternatives that take the same type are not supported"}
			}
		}
		for _, l := range an.lits {
			if nk&litKind(l) != 0 {
				return &SchemaError{Path: fmt.Sprintf("%s/%d", path, i), Msg: "alternatives that take the same type are not supported"}
			}
		}
		n.kinds |= an.kinds
		lits = append(lits, an.lits...)
		if an.obj != nil {
			n.obj = an.obj
		}
		if an.arr != nil {
			n.arr = an.arr
		}
		if an.str != nil {
			n.str = an.str
		}
		if an.num != nil {
			n.num = an.num
		}
	}
	slices.Sort(lits)
	n.lits = slices.Compact(lits)
	n.ready = true
	return nil
}

func (c *compiler) object(s map[string]any, path string, o *objRule) error {
	props := map[string]any{}
	if p, ok := s["properties"]; ok {
		if props, ok = p.(map[string]any); !ok {
			return &SchemaError{Path: path, Keyword: "properties", Msg: "want an object"}
		}
	}
	req := map[string]bool{}
	if r, ok := s["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return &SchemaError{Path: path, Keyword: "required", Msg: "want an array of property names"}
		}
		for _, k := range list {
			name, ok := k.(string)
			if !ok {
				return &SchemaError{Path: path, Keyword: "required", Msg: "want an array of property names"}
			}
			if _, ok := props[name]; !ok {
				return &SchemaError{Path: path, Keyword: "required", Msg: fmt.Sprintf("%q is not in properties", name)}
			}
			req[name] = true
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		pn, err := c.compile(props[name], path+"/properties/"+pointerEscape(name))
		if err != nil {
			return err
		}
		enc := encode(name)
		o.props = append(o.props, prop{key: enc[1 : len(enc)-1], n: pn, req: req[name]})
		if req[name] {
			o.nreq++
		}
	}
	sort.Slice(o.props, func(i, j int) bool { return o.props[i].key < o.props[j].key })
	return nil
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (c *compiler) array(s map[string]any, path string, a *arrRule) error {
	var err error
	if it, ok := s["items"]; ok {
		if _, isList := it.([]any); isList {
			return &SchemaError{Path: path, Keyword: "items", Msg: "an array of schemas (tuple items) is not supported"}
		}
		if a.items, err = c.compile(it, path+"/items"); err != nil {
			return err
		}
	} else {
		a.items = c.anyNode()
	}
	a.min, a.max, err = bounds(s, path, "minItems", "maxItems")
	return err
}

const inf = 1 << 30

// objLen is the length of n's shortest object.
func (n *node) objLen() int {
	l := 2
	for i := range n.obj.props {
		p := &n.obj.props[i]
		if p.req {
			l += p.kvLen() + 1
		}
	}
	if n.obj.nreq > 0 {
		l--
	}
	return min(l, inf)
}

// arrLen is the length of n's shortest array.
func (n *node) arrLen() int {
	a := n.arr
	if a.min == 0 {
		return 2
	}
	return min(2+a.min*(a.items.minLen+1)-1, inf)
}

// shortest computes every node's shortest value: lengths by a fixed
// point (schemas may be recursive), then the texts.
func (c *compiler) shortest() error {
	for _, n := range c.nodes {
		n.minLen = inf
	}
	for changed := true; changed; {
		changed = false
		for _, n := range c.nodes {
			l := inf
			for _, lit := range n.lits {
				l = min(l, len(lit))
			}
			if n.kinds&(kNumber|kInteger) != 0 {
				l = min(l, n.numLen())
			}
			if n.kinds&kString != 0 {
				l = min(l, n.strLen())
			}
			if n.kinds&(kBool|kNull) != 0 {
				l = min(l, 4)
			}
			if n.kinds&kArray != 0 {
				l = min(l, n.arrLen())
			}
			if n.kinds&kObject != 0 {
				l = min(l, n.objLen())
			}
			if l < n.minLen {
				n.minLen, changed = l, true
			}
		}
	}
	for _, n := range c.nodes {
		if n.minLen > MaxShortest {
			if n.minLen >= inf {
				return &SchemaError{Path: "#", Msg: "a subschema allows no finite value (a required property that recurses for ever)"}
			}
			return &SchemaError{Path: "#", Msg: fmt.Sprintf("the shortest value of a subschema is %d bytes, over %d", n.minLen, MaxShortest)}
		}
	}
	for _, n := range c.nodes {
		n.build()
		n.long = n.minLen
		for _, l := range n.lits {
			n.long = max(n.long, len(l))
		}
		if n.kinds&kObject != 0 {
			n.long = max(n.long, n.objLen())
		}
		if n.kinds&kArray != 0 {
			n.long = max(n.long, n.arrLen())
		}
		if n.kinds&kString != 0 {
			n.long = max(n.long, n.strLen())
		}
		if n.kinds&(kNumber|kInteger) != 0 {
			n.long = max(n.long, 20)
		}
	}
	return nil
}

// build sets n.short from the lengths.
func (n *node) build() string {
	if n.short != "" {
		return n.short
	}
	var b strings.Builder
	switch {
	case n.kinds&(kNumber|kInteger) != 0 && n.numLen() == n.minLen:
		if n.num == nil {
			b.WriteString("0")
		} else {
			b.WriteString(strconv.FormatInt(n.num.shortest(), 10))
		}
	case n.kinds&kString != 0 && n.strLen() == n.minLen:
		b.WriteString(`"` + strings.Repeat("a", n.str.min) + `"`)
	case n.kinds&kArray != 0 && n.arrLen() == n.minLen:
		b.WriteByte('[')
		for i := range n.arr.min {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(n.arr.items.build())
		}
		b.WriteByte(']')
	case n.kinds&kObject != 0 && n.objLen() == n.minLen:
		b.WriteByte('{')
		first := true
		for i := range n.obj.props {
			p := &n.obj.props[i]
			if p.req {
				if !first {
					b.WriteByte(',')
				}
				first = false
				b.WriteString(`"` + p.key + `":` + p.n.build())
			}
		}
		b.WriteByte('}')
	case n.kinds&kNull != 0 && n.minLen == 4:
		b.WriteString("null")
	case n.kinds&kBool != 0 && n.minLen == 4:
		b.WriteString("true")
	default:
		for _, l := range n.lits {
			if len(l) == n.minLen {
				b.WriteString(l)
				break
			}
		}
	}
	n.short = b.String()
	if len(n.short) != n.minLen {
		panic(errors.New("constrain: shortest value out of step with its length"))
	}
	return n.short
}
