package constrain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// testSchemas cover the supported subset: required and optional
// properties, enums and consts of every scalar type, integers, type
// lists, nested objects and arrays with item counts, anyOf and oneOf,
// $ref to $defs and to the root (recursion), keys that share prefixes or
// need escapes, annotations, and the any-value schema.
var testSchemas = map[string]string{
	"person": `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
		"color":{"enum":["red","green","blue"]},"nick":{"type":["string","null"]}},
		"required":["name","age","color"],"additionalProperties":false}`,
	"order": `{"type":"object","properties":{"lines":{"type":"array","items":{"type":"object","properties":{
		"id":{"type":"integer"},"price":{"type":"number"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
		"required":["id","price"],"additionalProperties":false},"minItems":1,"maxItems":4},
		"ok":{"type":"boolean"},"note":{"const":"fixed \"quote\" é"}},"required":["lines","ok"]}`,
	"defs": `{"$defs":{"addr":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}},"required":["city"]}},
		"type":"object","properties":{"home":{"anyOf":[{"$ref":"#/$defs/addr"},{"type":"null"}]},
		"level":{"enum":[1,2,10,2.5,"x",null,true]},"work":{"$ref":"#/$defs/addr"}},"required":["home","level","work"]}`,
	"tree": `{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"},"maxItems":2}},
		"required":["v","kids"]}`,
	"list":  `{"type":"array","items":{"type":["integer","string"]},"minItems":2,"maxItems":5}`,
	"keys":  `{"type":"object","properties":{"a":{"type":"boolean"},"ab":{"type":"null"},"abc":{"type":"string"},"a/b\"c":{"type":"integer"}},"required":["ab"]}`,
	"oneof": `{"type":"object","title":"t","properties":{"when":{"type":"string","format":"date-time","description":"d"},"kind":{"oneOf":[{"const":"a"},{"type":"integer"}]}},"required":["when","kind"]}`,
	"any":   `{}`,
	"text":  `{"type":"object","properties":{"code":{"type":"string","minLength":3,"maxLength":5},"note":{"type":["string","null"],"maxLength":2}},"required":["code"]}`,
	"range": `{"type":"object","properties":{"n":{"type":"integer","minimum":-30,"maximum":250},"p":{"type":"integer","exclusiveMinimum":99},
		"x":{"type":"number","minimum":0.5,"exclusiveMaximum":3},"neg":{"type":["integer","null"],"maximum":-7,"minimum":-1200},"z":{"type":"integer","minimum":0}},
		"required":["n","p","x","neg"]}`,
	"long": `{"type":"object","properties":{"e":{"enum":["a","a very long value, longer than the rest of this schema"]}},"required":["e"]}`,
	"num":  `{"type":"number"}`,
}

func schemaNames() []string {
	names := make([]string, 0, len(testSchemas))
	for k := range testSchemas {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// validator compiles a schema with an outside JSON Schema implementation.
func validator(t testing.TB, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// valid reports whether text is one JSON document valid under v.
func valid(v *jsonschema.Schema, text string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return v.Validate(inst)
}

func compileT(t testing.TB, src string) *Schema {
	t.Helper()
	s, err := CompileSchema([]byte(src))
	if err != nil {
		t.Fatalf("compile %s: %v", src, err)
	}
	return s
}

// gen makes a random value valid under the raw schema s (written for the
// test from the schema text, not from the compiled form).
type gen struct {
	r    *rand.Rand
	root map[string]any
}

type number string

func (g *gen) value(s any, depth int) any {
	m, _ := s.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		if ref == "#" {
			return g.value(g.root, depth+1)
		}
		name := strings.TrimPrefix(ref, "#/$defs/")
		return g.value(g.root["$defs"].(map[string]any)[name], depth+1)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok {
			return g.value(alts[g.r.IntN(len(alts))], depth)
		}
	}
	if c, ok := m["const"]; ok {
		return g.lit(c)
	}
	if e, ok := m["enum"].([]any); ok {
		return g.lit(e[g.r.IntN(len(e))])
	}
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	default:
		types = []string{"string", "number", "boolean", "null", "object"}
		if depth < 3 {
			types = append(types, "array")
		}
	}
	switch t := types[g.r.IntN(len(types))]; t {
	case "object":
		obj := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		req := map[string]bool{}
		if rl, ok := m["required"].([]any); ok {
			for _, k := range rl {
				req[k.(string)] = true
			}
		}
		for _, k := range slices.Sorted(mapKeys(props)) {
			if req[k] || depth < 4 && g.r.IntN(2) == 0 {
				obj[k] = g.value(props[k], depth+1)
			}
		}
		return obj
	case "array":
		lo, hi := 0, 3
		if v, ok := m["minItems"].(json.Number); ok {
			n, _ := v.Int64()
			lo = int(n)
			hi = lo + 3
		}
		if v, ok := m["maxItems"].(json.Number); ok {
			n, _ := v.Int64()
			hi = min(hi, int(n))
		}
		if depth >= 4 {
			hi = lo
		}
		n := lo + g.r.IntN(hi-lo+1)
		arr := make([]any, n)
		items, ok := m["items"]
		if !ok {
			items = map[string]any{}
		}
		for i := range arr {
			arr[i] = g.value(items, depth+1)
		}
		return arr
	case "string":
		lo, hi := 0, 8
		if v, ok := m["minLength"].(json.Number); ok {
			n, _ := v.Int64()
			lo, hi = int(n), int(n)+8
		}
		if v, ok := m["maxLength"].(json.Number); ok {
			n, _ := v.Int64()
			hi = min(hi, int(n))
		}
		return g.str(lo, hi)
	case "integer", "number":
		lo, hi, bounded := -1000, 1000, false
		for k, v := range m {
			x, err := strconv.ParseFloat(fmt.Sprint(v), 64)
			switch {
			case err != nil:
			case k == "minimum":
				lo, bounded = int(math.Ceil(x)), true
			case k == "exclusiveMinimum":
				lo, bounded = int(math.Floor(x))+1, true
			case k == "maximum":
				hi, bounded = int(math.Floor(x)), true
			case k == "exclusiveMaximum":
				hi, bounded = int(math.Ceil(x))-1, true
			}
		}
		if bounded || t == "integer" {
			if lo > hi {
				hi = lo + 1000
			}
			return number(strconv.Itoa(lo + g.r.IntN(hi-lo+1)))
		}
		forms := []string{"%d", "%d.%d", "-%d.%de%d", "%dE+%d", "%d.%de-%d"}
		f := forms[g.r.IntN(len(forms))]
		args := []any{g.r.IntN(500), g.r.IntN(100), g.r.IntN(20)}
		return number(fmt.Sprintf(f, args[:strings.Count(f, "%")]...))
	case "boolean":
		return g.r.IntN(2) == 0
	}
	return nil
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (g *gen) lit(v any) any {
	if n, ok := v.(json.Number); ok {
		return number(n)
	}
	return v
}

// str makes a string of lo to hi characters.
func (g *gen) str(lo, hi int) string {
	const chars = "ab Z09\"\\/\n\t\x01é€😀<>&"
	rs := []rune(chars)
	var b strings.Builder
	for range lo + g.r.IntN(hi-lo+1) {
		b.WriteRune(rs[g.r.IntN(len(rs))])
	}
	return b.String()
}

// write serializes v with random whitespace between tokens (at most
// MaxSpace bytes) and object keys in random order.
func (g *gen) write(b *strings.Builder, v any) {
	g.space(b)
	switch v := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		keys := slices.Sorted(mapKeys(v))
		g.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for i, k := range keys {
			if i > 0 {
				g.space(b)
				b.WriteByte(',')
			}
			g.space(b)
			b.WriteString(encode(k))
			g.space(b)
			b.WriteByte(':')
			g.write(b, v[k])
		}
		g.space(b)
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				g.space(b)
				b.WriteByte(',')
			}
			g.write(b, x)
		}
		g.space(b)
		b.WriteByte(']')
	case number:
		b.WriteString(string(v))
	default:
		b.WriteString(encode(v))
	}
	g.space(b)
}

func (g *gen) space(b *strings.Builder) {
	if s := b.String(); s != "" && isSpace(s[len(s)-1]) {
		return
	}
	if g.r.IntN(4) == 0 {
		b.WriteString([]string{" ", "\n", "  ", "\t "}[g.r.IntN(4)])
	}
}

// randomDocs makes n random documents valid under the schema src.
func randomDocs(t testing.TB, src string, n int, seed uint64) []string {
	var root map[string]any
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		t.Fatal(err)
	}
	g := &gen{r: rand.New(rand.NewPCG(seed, 7)), root: root}
	docs := make([]string, n)
	for i := range docs {
		var b strings.Builder
		g.write(&b, g.value(root, 0))
		docs[i] = strings.TrimSpace(b.String())
	}
	return docs
}

// TestSchemaAcceptsValidDocs: random documents of each schema (checked
// valid by an outside validator) are accepted byte by byte, every
// prefix's closing finishes a valid document, and the whole is done.
func TestSchemaAcceptsValidDocs(t *testing.T) {
	for _, name := range schemaNames() {
		src := testSchemas[name]
		v, s := validator(t, src), compileT(t, src)
		for i, doc := range randomDocs(t, src, 60, uint64(len(name))) {
			if err := valid(v, doc); err != nil {
				t.Fatalf("%s: generated document %q is invalid: %v", name, doc, err)
			}
			r := NewSchemaJSON(s)
			for k := range len(doc) {
				if i%4 == 0 {
					if c := r.Closing(); valid(v, doc[:k]+c) != nil || r.ClosingLen() != len(c) {
						t.Fatalf("%s: prefix %q + closing %q (length %d) is not valid: %v", name, doc[:k], c, r.ClosingLen(), valid(v, doc[:k]+c))
					}
				}
				if i%8 == 0 {
					before := r.ClosingLen()
					for c := range 256 {
						if after, ok := r.Try([]byte{byte(c)}, true); ok && after > before+r.Growth() {
							t.Fatalf("%s: after %q, %q raises the closing from %d to %d", name, doc[:k], byte(c), before, after)
						}
					}
				}
				want, _ := r.Try([]byte{doc[k]}, true)
				if !r.Feed([]byte{doc[k]}) {
					t.Fatalf("%s: %q refused after %q", name, doc[k:k+1], doc[:k])
				}
				if r.ClosingLen() != want {
					t.Fatalf("%s: after %q, Try says closing %d, Feed %d", name, doc[:k+1], want, r.ClosingLen())
				}
			}
			if !r.Done() || r.Closing() != "" {
				t.Fatalf("%s: %q is not done (closing %q)", name, doc, r.Closing())
			}
		}
	}
}

// TestSchemaRejectsInvalidDocs: documents that break the schema are
// refused (and the outside validator agrees they are invalid, except a
// duplicate key, which encoding/json tolerates); random corruptions of
// valid documents are either refused or still valid.
func TestSchemaRejectsInvalidDocs(t *testing.T) {
	bad := map[string][]string{
		"person": {
			`{"name":"a","age":1}`,                           // missing required
			`{"name":"a","age":1,"color":"red","x":1}`,       // extra key
			`{"name":1,"age":1,"color":"red"}`,               // wrong type
			`{"name":"a","age":1.5,"color":"red"}`,           // integer with a fraction
			`{"name":"a","age":1,"color":"pink"}`,            // not in the enum
			`{"name":"a","age":1,"color":"red","nick":true}`, // not in the type list
			`[]`, `"x"`, `{"name":"a","age":1,"color":"red"}x`,
		},
		"order": {
			`{"lines":[],"ok":true}`, // under minItems
			`{"lines":[{"id":1,"price":2},{"id":1,"price":2},{"id":1,"price":2},{"id":1,"price":2},{"id":1,"price":2}],"ok":true}`,
			`{"lines":[{"id":1,"price":2,"tags":["a","b","c","d"]}],"ok":true}`,
			`{"lines":[{"id":1}],"ok":true}`,
			`{"lines":[{"id":1,"price":2}],"ok":true,"note":"fixed"}`,
		},
		"defs": {
			`{"home":{},"level":1,"work":{"city":"x"}}`,
			`{"home":null,"level":3,"work":{"city":"x"}}`,
			`{"home":null,"level":false,"work":{"city":"x"}}`,
			`{"home":null,"level":1,"work":null}`,
		},
		"tree":  {`{"v":1,"kids":[{"v":2}]}`, `{"v":1,"kids":[{"v":2,"kids":[]},{"v":2,"kids":[]},{"v":2,"kids":[]}]}`},
		"list":  {`[1]`, `[1,2,3,4,5,6]`, `[1,true]`, `[1.5,2]`},
		"keys":  {`{}`, `{"ab":1}`, `{"ab":null,"a/b\"c":"x"}`},
		"oneof": {`{"when":"x","kind":"b"}`, `{"when":"x","kind":1.5}`},
		"range": {`{"n":251,"p":100,"x":1,"neg":-7}`, `{"n":-31,"p":100,"x":1,"neg":-7}`, `{"n":0,"p":99,"x":1,"neg":-7}`,
			`{"n":0,"p":100,"x":3,"neg":-7}`, `{"n":0,"p":100,"x":0,"neg":-7}`, `{"n":0,"p":100,"x":1,"neg":-6}`,
			`{"n":0,"p":100,"x":1,"neg":-1201}`, `{"n":0,"p":100,"x":1,"neg":-7,"z":-1}`},
		"text": {`{"code":"ab"}`, `{"code":"abcdef"}`, `{"code":"é€"}`, `{"code":"abc","note":"xyz"}`, `{"code":"\n\n\n\n\n\n"}`},
		"num":  {`"1"`, `1.`, `-`},
	}
	for _, name := range schemaNames() {
		src := testSchemas[name]
		v, s := validator(t, src), compileT(t, src)
		for _, doc := range bad[name] {
			if r := NewSchemaJSON(s); r.Feed([]byte(doc)) && r.Done() {
				t.Errorf("%s: %q accepted", name, doc)
			}
			if valid(v, doc) == nil {
				t.Errorf("%s: the validator accepts %q: not a bad document", name, doc)
			}
		}
		// valid, but outside what is generated: integers with an
		// exponent, enum values written another way, keys with escapes
		subset := map[string][]string{
			"person": {`{"name":"a","age":1e2,"color":"red"}`, `{"name":"a","age":1,"color":"r\u0065d"}`, `{"n\u0061me":"a","age":1,"color":"red"}`},
			"defs":   {`{"home":null,"level":2.50,"work":{"city":"x"}}`},
			// invalid UTF-8 (which decoders replace), a surrogate pair
			// under a minimum length
			// bounded numbers are written as integers, without -0
			"range": {`{"n":0,"p":100,"x":1.5,"neg":-7}`, `{"n":-0,"p":100,"x":1,"neg":-7}`},
			"text":  {"{\"code\":\"ab\xff\"}", `{"code":"\ud83d\ude00ab"}`},
		}
		for _, doc := range subset[name] {
			if r := NewSchemaJSON(s); r.Feed([]byte(doc)) && r.Done() {
				t.Errorf("%s: %q accepted", name, doc)
			}
			if err := valid(v, doc); err != nil {
				t.Errorf("%s: the validator refuses %q: %v", name, doc, err)
			}
		}
		dup := map[string]string{"person": `{"name":"a","name":"b","age":1,"color":"red"}`, "keys": `{"ab":null,"ab":null}`}
		if d, ok := dup[name]; ok {
			if r := NewSchemaJSON(s); r.Feed([]byte(d)) {
				t.Errorf("%s: duplicate key accepted in %q", name, d)
			}
		}
		rnd := rand.New(rand.NewPCG(5, uint64(len(name))))
		for _, doc := range randomDocs(t, src, 40, 99) {
			for range 20 {
				b := []byte(doc)
				i := rnd.IntN(len(b))
				const pool = `{}[],:"\0123456789-+.eEtfnlu axbc`
				switch rnd.IntN(3) {
				case 0:
					b[i] = pool[rnd.IntN(len(pool))]
				case 1:
					b = append(b[:i], b[i+1:]...)
				case 2:
					b = slices.Insert(b, i, pool[rnd.IntN(len(pool))])
				}
				if r := NewSchemaJSON(s); r.Feed(b) && r.Done() {
					if err := valid(v, string(b)); err != nil {
						t.Fatalf("%s: accepted %q, which is invalid: %v", name, b, err)
					}
				}
			}
		}
	}
}

// walkVocab is a vocabulary for random walks: every printable ASCII
// byte, the two bytes of é, and longer pieces of JSON and of the
// schema's keys.
func walkVocab(src string) [][]byte {
	var vocab [][]byte
	for c := byte(0x20); c < 0x7f; c++ {
		vocab = append(vocab, []byte{c})
	}
	vocab = append(vocab, []byte{0xc3}, []byte{0xa9}, []byte("\n"))
	for _, p := range []string{`{"`, `":`, `","`, `"}`, `},{`, `[{`, `}]`, "true", "null", "12", "-3.5", `""`, `\"`, `\u00e9`, ", ", `"x"`, "é"} {
		vocab = append(vocab, []byte(p))
	}
	for _, q := range strings.Split(src, `"`) {
		if len(q) > 0 && len(q) < 12 && !strings.ContainsAny(q, "{}[]:, \t\n") {
			vocab = append(vocab, []byte(q), []byte(`"`+q+`"`), []byte(q+`":`))
		}
	}
	return vocab
}

// TestSchemaMaskRandomWalk draws random allowed tokens with a small
// budget: every walk ends in a document the outside validator accepts,
// and at every step the text plus its closing is one.
func TestSchemaMaskRandomWalk(t *testing.T) {
	for _, name := range schemaNames() {
		src := testSchemas[name]
		v, s := validator(t, src), compileT(t, src)
		tokens := walkVocab(src)
		stop := len(tokens)
		tokens = append(tokens, nil)
		r := rand.New(rand.NewPCG(11, uint64(len(name))))
		logits := make([]float32, len(tokens))
		for walk := range 60 {
			budget := s.root.minLen + r.IntN(60)
			rec := NewSchemaJSON(s)
			m := NewMaskFor(rec, tokens, []int{stop}, budget)
			var gen []int
			var text []byte
			for len(gen) < budget {
				for i := range logits {
					logits[i] = 0
				}
				m.Apply(logits, gen)
				if c := rec.Closing(); len(c) != rec.ClosingLen() || walk%6 == 0 && valid(v, string(text)+c) != nil {
					t.Fatalf("%s walk %d: %q + closing %q (length %d) is not valid", name, walk, text, c, rec.ClosingLen())
				}
				var allowed []int
				for i, l := range logits {
					if !math.IsInf(float64(l), -1) {
						allowed = append(allowed, i)
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("%s walk %d: nothing allowed after %q", name, walk, text)
				}
				id := allowed[r.IntN(len(allowed))]
				if id == stop {
					break
				}
				// the bound the mask relies on to skip its budget check
				before := rec.ClosingLen()
				if after, _ := rec.Try(tokens[id], true); after > before+len(tokens[id])*rec.Growth() {
					t.Fatalf("%s: %q after %q raises the closing from %d to %d, over Growth %d a byte", name, tokens[id], text, before, after, rec.Growth())
				}
				gen = append(gen, id)
				text = append(text, tokens[id]...)
			}
			m.Apply(logits, gen)
			if !m.Done() {
				t.Fatalf("%s walk %d (budget %d): %q is not complete", name, walk, budget, text)
			}
			if err := valid(v, string(text)); err != nil {
				t.Fatalf("%s walk %d: %q is invalid: %v", name, walk, text, err)
			}
		}
	}
}

// TestCompileSchemaErrors: schemas outside the subset are refused with
// an error naming the keyword or the problem.
func TestCompileSchemaErrors(t *testing.T) {
	cases := map[string]string{
		`{"type":"string","pattern":"^a"}`:                                       "pattern",
		`{"type":"object","properties":{"n":{"type":"integer","multipleOf":2}}}`: "multipleOf",
		`{"type":"number","minimum":0.2,"maximum":0.8}`:                          "no integer",
		`{"enum":[1,2],"minimum":2}`:                                             "next to enum",
		`{"type":"strin"}`:                                                       "type",
		`{"type":"object","required":["x"]}`:                                     `"x" is not in properties`,
		`{"$ref":"#/$defs/missing"}`:                                             "not defined",
		`{"$ref":"http://example.com/s.json"}`:                                   "only #",
		`{"anyOf":[{"type":"string"},{"enum":["a"]}]}`:                           "same type",
		`{"allOf":[{"type":"string"},{"type":"null"}]}`:                          "allOf of one",
		`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`:     "no finite value",
		`{"enum":[{"a":1}]}`:                                                     "object and array values",
		`{"type":"string","enum":[1,2]}`:                                         "no value of the enum",
		`false`:                                                                  "allows no value",
		`[1]`:                                                                    "a schema is an object",
		`{"type":"array","items":[{"type":"string"}]}`:                           "tuple",
		`{"type":"array","minItems":3,"maxItems":2}`:                             "less than minItems",
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`: "refers to itself",
		`{"type":"array","minItems":1.5}`:                                                  "minItems",
		`{} {}`:                                                                            "text after",
		`{"type":"string","minLength":3,"maxLength":2}`:                                    "less than minLength",
		`{"enum":["a","bb"],"minLength":2}`:                                                "next to enum",
		`{"type":"string","not":{"const":"a"}}`:                                            "not",
	}
	for src, want := range cases {
		_, err := CompileSchema([]byte(src))
		var se *SchemaError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one with %q", src, err, want)
		}
	}
}

// TestSchemaShortest: the shortest documents, with annotations and an
// unenforced additionalProperties ignored.
func TestSchemaShortest(t *testing.T) {
	cases := map[string]string{
		`{"type":"object","properties":{"b":{"type":"integer"},"a":{"enum":["xy","z"]},"c":{"type":"string"}},"required":["a","b"],"additionalProperties":true,"description":"d"}`: `{"a":"z","b":0}`,
		`{"type":"array","items":{"type":"boolean"},"minItems":2}`:                                       `[true,true]`,
		`{"type":"integer","minimum":-40,"maximum":-12}`:                                                 `-12`,
		`{"type":"number","exclusiveMinimum":99.5}`:                                                      `100`,
		`{"type":"string","minLength":3}`:                                                                `"aaa"`,
		`{"type":["null","string"]}`:                                                                     `""`,
		`{"anyOf":[{"type":"null"},{"const":7}]}`:                                                        `7`,
		`{"type":"object","properties":{"k":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["k"]}`: `{"k":null}`,
	}
	for src, want := range cases {
		s := compileT(t, src)
		r := NewSchemaJSON(s)
		if got := r.Closing(); got != want {
			t.Errorf("%s: shortest %q, want %q", src, got, want)
		}
	}
}

// TestMaskFor: a mask over a schema recognizer allows only the tokens
// that can follow, and only the stop id once the document is complete.
func TestMaskFor(t *testing.T) {
	s := compileT(t, `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)
	tokens := [][]byte{[]byte(`{"ok":`), []byte("true"), []byte("}"), []byte("x"), nil}
	m := NewMaskFor(NewSchemaJSON(s), tokens, []int{4}, 10)
	logits := make([]float32, 5)
	m.Apply(logits, nil)
	if !math.IsInf(float64(logits[3]), -1) || math.IsInf(float64(logits[0]), -1) || !math.IsInf(float64(logits[4]), -1) {
		t.Fatalf("first step logits %v", logits)
	}
	clear(logits)
	m.Apply(logits, []int{0, 1, 2})
	if !m.Done() || math.IsInf(float64(logits[4]), -1) || !math.IsInf(float64(logits[0]), -1) {
		t.Fatalf("after the document: done %v, logits %v", m.Done(), logits)
	}
}

// FuzzSchemaJSON compiles a schema and feeds a text: nothing panics, and
// whenever a prefix is accepted, it plus its closing is done and JSON.
func FuzzSchemaJSON(f *testing.F) {
	for _, name := range schemaNames() {
		for _, d := range randomDocs(f, testSchemas[name], 3, 1) {
			f.Add(testSchemas[name], d)
		}
	}
	f.Add(`{"anyOf":[{"type":"null"},{"const":7}]}`, `7`)
	f.Fuzz(func(t *testing.T, schema, text string) {
		if len(schema) > 4096 || len(text) > 512 {
			return
		}
		s, err := CompileSchema([]byte(schema))
		if err != nil || s.root.minLen > 1024 {
			return // (long closings make each step slow, not different)
		}
		r := NewSchemaJSON(s)
		for i := range len(text) + 1 {
			c := r.Closing()
			if len(c) != r.ClosingLen() {
				t.Fatalf("closing %q, length %d", c, r.ClosingLen())
			}
			if _, ok := r.Try([]byte(c), false); !ok {
				t.Fatalf("%q: own closing %q refused", text[:i], c)
			}
			if !r.scratch.Done() || !json.Valid(append([]byte(text[:i]), c...)) {
				t.Fatalf("%q + closing %q: not a complete document", text[:i], c)
			}
			if i == len(text) || !r.Feed([]byte{text[i]}) {
				break
			}
		}
	})
}

// BenchmarkSchemaMask: one mask step over a vocabulary of 150k tokens (the
// size of Qwen's), in a string value and between keys of an object, with
// the schema recognizer and with the plain JSON one.
func BenchmarkSchemaMask(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const chars = `abcdefghij {}[]":,0123456789-.`
	tokens := make([][]byte, 150000)
	for i := range tokens {
		t := make([]byte, 1+r.IntN(8))
		for k := range t {
			t[k] = chars[r.IntN(len(chars))]
		}
		tokens[i] = t
	}
	s, err := CompileSchema([]byte(testSchemas["person"]))
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, len(tokens))
	for _, prefix := range []string{`{"name": "ab`, `{"name": "ab", `} {
		for _, kind := range []string{"schema", "json"} {
			b.Run(kind+"/"+strings.TrimSpace(prefix[len(prefix)-3:]), func(b *testing.B) {
				for b.Loop() {
					var rec Recognizer = NewSchemaJSON(s)
					if kind == "json" {
						rec = NewJSON(true)
					}
					rec.Feed([]byte(prefix))
					m := NewMaskFor(rec, tokens, nil, 200)
					m.Apply(logits, nil)
				}
			})
		}
	}
}

// TestIntegerRange: a bounded integer is accepted exactly when it is in
// range, every prefix of one is finished by its closing into a number in
// range, and numbers out of range are refused as soon as no digit can
// bring them back.
func TestIntegerRange(t *testing.T) {
	for _, c := range []struct{ lo, hi int }{{-30, 250}, {100, 100}, {-1200, -7}, {7, 1300}, {0, 0}, {-5, 5}, {95, 1005}} {
		s := compileT(t, fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, c.lo, c.hi))
		for x := -1500; x <= 1500; x++ {
			text := strconv.Itoa(x)
			r := NewSchemaJSON(s)
			got := r.Feed([]byte(text)) && r.Done()
			if want := c.lo <= x && x <= c.hi; got != want {
				t.Fatalf("[%d, %d]: %d accepted %v", c.lo, c.hi, x, got)
			}
			for n := 1; n <= len(text); n++ {
				r := NewSchemaJSON(s)
				if !r.Feed([]byte(text[:n])) {
					break
				}
				v, err := strconv.Atoi(text[:n] + r.Closing())
				if err != nil || v < c.lo || v > c.hi {
					t.Fatalf("[%d, %d]: prefix %q closes to %q", c.lo, c.hi, text[:n], text[:n]+r.Closing())
				}
			}
		}
	}
}

// TestLargeEnum: with a thousand values sharing prefixes, each value is
// accepted, and strings near them (a byte short, a byte more, another
// byte) only when they are values too.
func TestLargeEnum(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	vals := map[string]bool{}
	for len(vals) < 1000 {
		b := make([]byte, 1+r.IntN(6))
		for i := range b {
			b[i] = "abcd"[r.IntN(4)]
		}
		vals[string(b)] = true
	}
	list := slices.Sorted(func(yield func(string) bool) {
		for v := range vals {
			if !yield(v) {
				return
			}
		}
	})
	enum, _ := json.Marshal(list)
	s := compileT(t, `{"type":"object","properties":{"v":{"enum":`+string(enum)+`}},"required":["v"]}`)
	for _, v := range list {
		for _, x := range []string{v, v[:len(v)-1], v + "a", v[:len(v)-1] + "e", v + "b"} {
			rec := NewSchemaJSON(s)
			got := rec.Feed([]byte(`{"v":"`+x+`"}`)) && rec.Done()
			if got != vals[x] {
				t.Fatalf("%q accepted %v", x, got)
			}
		}
	}
}
