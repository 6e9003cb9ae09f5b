package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A forced call in a format that writes its arguments as text
// (Qwen3-Coder XML, GLM-4.5, Gemma) is kept to a grammar written from
// the tool's parameters schema: each property in the schema's order (the
// required ones always, the others optionally; Gemma's optional ones
// after the required), its value by the property's type. Strings are
// free text without '<' (which would open the closing mark), numbers
// are written plainly (their bounds unchecked), enum and const values
// are the listed ones, objects and arrays any JSON object or array (their
// own keywords unchecked) and untyped values any JSON value (Gemma's own
// syntax for Gemma).

// gbnfLit writes s as a GBNF literal.
func gbnfLit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// textValueRules are the rules of the values written as text: JSON
// values (jval) with no '<' in their strings, and Gemma's values (gval),
// whose strings sit between quote marks (gq) and whose keys are bare.
const textValueRules = `
jval ::= jobj | jarr | jstr | jnum | "true" | "false" | "null"
jobj ::= "{" (jstr ":" jval ("," jstr ":" jval)*)? "}"
jarr ::= "[" (jval ("," jval)*)? "]"
jstr ::= "\"" ([^"\\<\x00-\x1F] | "\\" ["\\/bfnrt])* "\""
jnum ::= "-"? jnat ("." [0-9]{1,6})?
jnat ::= "0" | [1-9] [0-9]{0,14}
gval ::= gobj | garr | gstr | jnum | "true" | "false" | "null"
gobj ::= "{" (gkey ":" gval ("," gkey ":" gval)*)? "}"
garr ::= "[" (gval ("," gval)*)? "]"
gstr ::= gq [^<]* gq
gkey ::= [a-zA-Z_] [a-zA-Z0-9_]*
`

// argSchema is the part of a property's schema the grammar reads.
type argSchema struct {
	Type      json.RawMessage `json:"type"`
	Enum      []any           `json:"enum"`
	Const     *any            `json:"const"`
	MinLength *int            `json:"minLength"`
	MaxLength *int            `json:"maxLength"`
	Minimum   *float64        `json:"minimum"`
}

// maxTextRepeat is the largest repetition count a grammar is written
// with (constrain's limit); longer bounds are left open.
const maxTextRepeat = 256

// typeName is the property's type as the call's parser reads it (the
// first of a list).
func (a *argSchema) typeName() string {
	var one string
	var list []string
	switch {
	case json.Unmarshal(a.Type, &one) == nil:
		return one
	case json.Unmarshal(a.Type, &list) == nil && len(list) > 0:
		return list[0]
	}
	return ""
}

// valueExpr is the GBNF expression of a property's value; gemma selects
// Gemma's syntax (strings between quote marks).
func valueExpr(a *argSchema, gemma bool) string {
	typ := a.typeName()
	lit := func(v any) string {
		if s, ok := v.(string); ok {
			switch {
			case gemma:
				return "gq " + gbnfLit(s) + " gq"
			case typ == "string":
				return gbnfLit(s)
			}
		}
		b, _ := json.Marshal(v)
		return gbnfLit(string(b))
	}
	switch {
	case a.Const != nil:
		return lit(*a.Const)
	case len(a.Enum) > 0:
		alts := make([]string, len(a.Enum))
		for i, v := range a.Enum {
			alts[i] = lit(v)
		}
		return "(" + strings.Join(alts, " | ") + ")"
	}
	switch typ {
	case "string":
		lo, hi := 0, -1
		if a.MinLength != nil {
			lo = min(max(*a.MinLength, 0), maxTextRepeat)
		}
		if a.MaxLength != nil && *a.MaxLength <= maxTextRepeat {
			hi = max(*a.MaxLength, lo)
		}
		rep := "*"
		switch {
		case hi >= 0:
			rep = fmt.Sprintf("{%d,%d}", lo, hi)
		case lo > 0:
			rep = fmt.Sprintf("{%d,}", lo)
		}
		if gemma {
			return "gq [^<]" + rep + " gq"
		}
		return "[^<]" + rep
	case "integer":
		if a.Minimum != nil && *a.Minimum >= 0 {
			return "jnat"
		}
		return `"-"? jnat`
	case "number":
		return "jnum"
	case "boolean":
		return `("true" | "false")`
	case "null":
		return `"null"`
	case "object":
		if gemma {
			return "gobj"
		}
		return "jobj"
	case "array":
		if gemma {
			return "garr"
		}
		return "jarr"
	}
	if gemma {
		return "gval"
	}
	return "jval"
}

// callProperty is one property of a tool's parameters, in order.
type callProperty struct {
	key      string
	required bool
	schema   argSchema
}

// callProperties reads the properties of a parameters schema in the
// order they are written.
func callProperties(params []byte) ([]callProperty, error) {
	var top struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(params, &top); err != nil {
		return nil, err
	}
	req := map[string]bool{}
	for _, k := range top.Required {
		req[k] = true
	}
	var props []callProperty
	if len(top.Properties) == 0 || string(top.Properties) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(top.Properties))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("properties is not an object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		p := callProperty{key: key, required: req[key]}
		if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
			if err := json.Unmarshal(raw, &p.schema); err != nil {
				return nil, fmt.Errorf("property %s: %v", key, err)
			}
		}
		props = append(props, p)
	}
	return props, nil
}

// textCallGrammar is the GBNF of one call of tool name in format f
// (formatQwenXML, formatGLM or formatGemma; quote is Gemma's string
// mark), its arguments under the parameters schema.
func textCallGrammar(f toolFormat, name string, params []byte, quote string) (string, error) {
	props, err := callProperties(params)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var body []string
	gemma := f == formatGemma
	if gemma {
		// the required first, then the optional, each after a comma
		sort.SliceStable(props, func(i, j int) bool { return props[i].required && !props[j].required })
	}
	for i, p := range props {
		v := valueExpr(&p.schema, gemma)
		var item string
		switch f {
		case formatQwenXML:
			item = gbnfLit("<parameter="+p.key+">\n") + " " + v + " " + gbnfLit("\n</parameter>\n")
		case formatGLM:
			item = gbnfLit("<arg_key>"+p.key+"</arg_key>\n<arg_value>") + " " + v + " " + gbnfLit("</arg_value>\n")
		default:
			key := p.key + ":"
			if i > 0 {
				key = "," + key
			}
			if !p.required && (i == 0 || !props[0].required) {
				continue // no required property to put the comma after
			}
			item = gbnfLit(key) + " " + v
		}
		if !p.required {
			item = "(" + item + ")?"
		}
		body = append(body, item)
	}
	args := strings.Join(body, " ")
	switch f {
	case formatQwenXML:
		fmt.Fprintf(&b, "root ::= %s %s %s\n", gbnfLit(hermesOpen+"\n"+xmlFunction+name+">\n"), args, gbnfLit(xmlFunctionEnd+"\n"+hermesClose))
	case formatGLM:
		fmt.Fprintf(&b, "root ::= %s %s %s\n", gbnfLit(hermesOpen+name+"\n"), args, gbnfLit(hermesClose))
	case formatGemma:
		open, closeMark := gemmaOpen, gemmaClose
		if quote == fgemmaQuote {
			open, closeMark = fgemmaOpen, fgemmaClose
		}
		fmt.Fprintf(&b, "root ::= %s %s %s\n", gbnfLit(open+"call:"+name+"{"), args, gbnfLit("}"+closeMark))
		b.WriteString("gq ::= " + gbnfLit(quote) + "\n")
	default:
		return "", fmt.Errorf("format %s writes no text arguments", f)
	}
	if !gemma {
		b.WriteString("gq ::= " + strconv.Quote(`"`) + "\n")
	}
	b.WriteString(textValueRules)
	return b.String(), nil
}
