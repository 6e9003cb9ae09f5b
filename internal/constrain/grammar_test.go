package constrain

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// fullMatch feeds s byte by byte and reports whether it is a complete
// string of g.
func fullMatch(g *Grammar, s string) bool {
	r := NewGrammarRecognizer(g)
	return r.Feed([]byte(s)) && r.Done()
}

func mustGBNF(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := ParseGBNF(src)
	if err != nil {
		t.Fatalf("ParseGBNF(%q): %v", src, err)
	}
	return g
}

func TestGBNFAccepts(t *testing.T) {
	cases := []struct {
		src     string
		yes, no []string
	}{
		{`root ::= "yes" | "no"`, []string{"yes", "no"}, []string{"", "y", "yesno", "No"}},
		{`root ::= [a-c]+ "!"?`, []string{"a", "abc!", "ccc"}, []string{"", "!", "ad", "a!!"}},
		{`root ::= [^a-z\n]{2,3}`, []string{"AB", "12é", "   "}, []string{"A", "ABCD", "aB", "A\n"}},
		{"# a list\nroot ::= item (\",\" ws item)*\nitem ::= [0-9]+ # digits\nws ::= \" \"?\n",
			[]string{"1", "1,2", "10, 20,3"}, []string{"", "1,", ",1", "1,,2", "1,  2"}},
		{`root ::= "a" x "c"
x ::=
  "b"
  | ( "d" | "e" ) x`, []string{"abc", "adbc", "aedbc"}, []string{"ac", "adc", "abbc"}},
		{`root ::= "\x41\u00e9\t\"\\" [\]\-]`, []string{"Aé\t\"\\]", "Aé\t\"\\-"}, []string{"Aé\t\"\\a"}},
		{`root ::= . "日本"{1,}`, []string{"x日本", "😀日本日本"}, []string{"x日", "日本"}},
		{`root ::= "a"{3}`, []string{"aaa"}, []string{"aa", "aaaa"}},
		{`root ::= "a"{2,}`, []string{"aa", "aaaaa"}, []string{"a"}},
		{`root ::= "" | "x"`, []string{"", "x"}, []string{"xx"}},
	}
	for _, c := range cases {
		g := mustGBNF(t, c.src)
		for _, s := range c.yes {
			if !fullMatch(g, s) {
				t.Errorf("%q: %q is refused", c.src, s)
			}
		}
		for _, s := range c.no {
			if fullMatch(g, s) {
				t.Errorf("%q: %q is accepted", c.src, s)
			}
		}
	}
}

func TestGBNFErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{`item ::= "a"`, "no root rule"},
		{`root ::= "a`, "line 1, column 10: unterminated string"},
		{"root ::= x\n", "line 1, column 10: rule x is not defined"},
		{"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule root is defined twice"},
		{"root ::= root \"a\" | \"b\"", "line 1, column 1: rule root is left-recursive"},
		{"root ::= x \"a\" | \"b\"\nx ::= \"\"? root", "line 1, column 1: rule root is left-recursive"},
		{"root ::= (\"a\"?)*", "line 1, column 16: a repetition"},
		{"root ::= \"a\" root", "rule root can never end"},
		{"root ::= [b-a]", "line 1, column 10: character range"},
		{"root ::= \"a\"{5,2}", "maximum below its minimum"},
		{"root ::= \"a\"{1000}", "repetition count"},
		{"root ::= " + strings.Repeat(`"a"{256} `, 300), "grammar line 1, column 2290: too large"},
		{"root ::= <[1000]>", "line 1, column 10: unexpected '<'"},
		{"root ::= \"\\q\"", "unknown escape \\q"},
		{"root = \"a\"", "line 1, column 6: expected ::="},
		{"root ::= (\"a\"", "line 1, column 10: unclosed ("},
		{"root ::= [a", "unterminated character class"},
		{"root ::= \"a\" )", "line 1, column 14: unexpected ')'"},
	}
	for _, c := range cases {
		_, err := ParseGBNF(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseGBNF(%q) = %v, want an error containing %q", c.src, err, c.want)
		}
	}
}

func TestRegexErrors(t *testing.T) {
	for _, expr := range []string{`a(`, `\bword`, `a^b`, `(a*)*x`, `a$b`} {
		if _, err := CompileRegex(expr); err == nil {
			t.Errorf("CompileRegex(%q) succeeded", expr)
		}
	}
}

// TestRegexAgainstGo compares the recognizer with package regexp on
// random strings: the whole-string match must agree, every prefix of a
// match must be accepted with a shortest completion no longer than the
// rest, and Try must agree with Feed.
func TestRegexAgainstGo(t *testing.T) {
	exprs := []string{
		`a*b`, `(ab|a)*c?`, `[a-c]{2,4}`, `x|y|`, `(?i)Ab+`, `[^b]*b`, `a.c`,
		`\d{1,3}(\.\d+)?`, `(a|bc)+(c|)`, `^ab$`, `é+a?`, `[a-cé]{0,2}b+`, `(a?b){2}`,
	}
	alphabet := []string{"a", "b", "c", "A", "B", "x", "y", "1", "2", ".", "é", "\n", "\xc3", "\xa9", "\xe0", "\xed", "\x80", "\xc0"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, expr := range exprs {
		g, err := CompileRegex(expr)
		if err != nil {
			t.Fatalf("CompileRegex(%q): %v", expr, err)
		}
		want := regexp.MustCompile(`^(?:` + expr + `)$`)
		matched := 0
		for range 8000 {
			var sb strings.Builder
			for range rng.IntN(7) {
				sb.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			s := sb.String()
			// invalid UTF-8 is never accepted (package regexp reads it
			// as U+FFFD), nor any prefix ending in a byte no valid text
			// continues
			got, exp := fullMatch(g, s), want.MatchString(s) && utf8.ValidString(s)
			r := NewGrammarRecognizer(g)
			for i := 0; i < len(s) && r.Feed([]byte{s[i]}); i++ {
				if p := s[:i+1]; !utf8.ValidString(p) && !validStart(p) {
					t.Fatalf("%q: prefix %q accepted", expr, p)
				}
			}
			if got != exp {
				t.Fatalf("%q on %q: recognizer %v, regexp %v", expr, s, got, exp)
			}
			if !exp {
				continue
			}
			matched++
			r = NewGrammarRecognizer(g)
			for i := 0; i < len(s); i++ {
				if n := r.ClosingLen(); n > len(s)-i {
					t.Fatalf("%q on %q after %d bytes: closing %d > %d left", expr, s, i, n, len(s)-i)
				}
				n, ok := r.Try([]byte(s[i:]), true)
				if !ok || n != 0 {
					t.Fatalf("%q: Try(%q) after %q = %d, %v; want 0, true", expr, s[i:], s[:i], n, ok)
				}
				if !r.Feed([]byte{s[i]}) {
					t.Fatalf("%q: prefix %q of a match refused", expr, s[:i+1])
				}
			}
		}
		if matched == 0 {
			t.Errorf("%q: no random string matched; the comparison is empty", expr)
		}
	}
}

// validStart reports whether p is valid UTF-8 up to an unfinished
// character that some continuation bytes make valid.
func validStart(p string) bool {
	for k := 1; k <= 3 && k <= len(p); k++ {
		head, tail := p[:len(p)-k], p[len(p)-k:]
		if !utf8.ValidString(head) {
			continue
		}
		for _, c := range []string{"\x80", "\x80\x80", "\x80\x80\x80", "\xa0", "\xa0\x80", "\x90\x80\x80", "\xbf", "\xbf\xbf", "\x9f\xbf"} {
			if utf8.ValidString(tail + c) {
				return true
			}
		}
	}
	return false
}

// TestGrammarClosing: the shortest completion is exact at the start and
// after an unfinished character.
func TestGrammarClosing(t *testing.T) {
	g := mustGBNF(t, `root ::= "ab" ("é" | "cde") [x-z]*`)
	r := NewGrammarRecognizer(g)
	if n := r.ClosingLen(); n != 4 {
		t.Fatalf("closing at start %d, want 4 (ab + é)", n)
	}
	r.Feed([]byte("ab\xc3"))
	if n := r.ClosingLen(); n != 1 {
		t.Fatalf("closing inside é %d, want 1", n)
	}
	if _, ok := r.Try([]byte("\xa9"), false); !ok {
		t.Fatal("the end of é is refused")
	}
	if _, ok := r.Try([]byte("\xa8"), false); ok {
		t.Fatal("è's last byte is accepted")
	}
	// a lead byte whose characters the grammar cannot take, an overlong
	// or surrogate start, is refused at once
	for _, c := range []struct {
		src  string
		b    []byte
		want bool
	}{
		{`root ::= "{"`, []byte{0xE0}, false},
		{`root ::= "{"`, []byte{0xF0}, false},
		{`root ::= "{"`, []byte{0xC3}, false},
		{`root ::= [^a]`, []byte{0xE0, 0x81}, false},
		{`root ::= [^a]`, []byte{0xED, 0xA0}, false},
		{`root ::= [^a]`, []byte{0xF4, 0x90}, false},
		{`root ::= [^a]`, []byte{0xE2, 0x82}, true},
		{`root ::= [^a]`, []byte{0xED, 0x9F}, true},
		{`root ::= [ࠀ-￿]`, []byte{0xDF}, false},
		{`root ::= [ࠀ-￿]`, []byte{0xE0, 0xA0}, true},
	} {
		_, ok := NewGrammarRecognizer(mustGBNF(t, c.src)).Try(c.b, false)
		if ok != c.want {
			t.Errorf("%s: % x accepted %v, want %v", c.src, c.b, ok, c.want)
		}
	}
	r2 := NewGrammarRecognizer(g)
	if _, ok := r2.Try([]byte("ab\xc4"), false); ok {
		t.Fatal("a lead byte no character of the set starts with is accepted")
	}
}

// TestGrammarMask draws tokens at random under a grammar mask over a
// small vocabulary of multi-byte tokens and checks each output with
// package regexp, and that it is complete whenever the budget allowed.
func TestGrammarMask(t *testing.T) {
	g := mustGBNF(t, `root ::= "{" pair ("," pair)* "}"
pair ::= [a-z]+ "=" ("yes" | "no" | [0-9]{1,3})`)
	check := regexp.MustCompile(`^\{[a-z]+=(yes|no|[0-9]{1,3})(,[a-z]+=(yes|no|[0-9]{1,3}))*\}$`)
	vocab := []string{"", "{", "}", ",", "=", "a", "b", "ab", "key", "yes", "no", "ye", "s", "0", "12", "345", "}{", "=no}", ",x=", "q", "!"}
	tokens := make([][]byte, len(vocab))
	for i, v := range vocab {
		if v != "" {
			tokens[i] = []byte(v)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		budget := 6 + trial%20
		m := NewMaskFor(NewGrammarRecognizer(g), tokens, []int{0}, budget)
		var gen []int
		var out strings.Builder
		for len(gen) < budget {
			logits := make([]float32, len(vocab))
			for i := range logits {
				logits[i] = float32(rng.NormFloat64())
			}
			m.Apply(logits, gen)
			best, bl := -1, float32(math.Inf(-1))
			for i, l := range logits {
				if l > bl {
					best, bl = i, l
				}
			}
			if best < 0 {
				t.Fatalf("trial %d: every token masked after %q", trial, out.String())
			}
			if best == 0 {
				break
			}
			gen = append(gen, best)
			out.WriteString(vocab[best])
		}
		if trial < 4 {
			t.Logf("budget %d: %s", budget, out.String())
		}
		m.Apply(make([]float32, len(vocab)), gen)
		if !check.MatchString(out.String()) || !m.Done() {
			t.Fatalf("trial %d (budget %d): output %q is not in the grammar (done %v)", trial, budget, out.String(), m.Done())
		}
	}
}

// TestGrammarAmbiguous: parses that meet again are followed once, so a
// grammar with 4^40 ways to read its empty prefix steps at once.
func TestGrammarAmbiguous(t *testing.T) {
	g := mustGBNF(t, `root ::= `+strings.Repeat("b ", 40)+`"z"
b ::= "x"? | "y"?`)
	for _, s := range []string{"z", "xyxz", strings.Repeat("x", 40) + "z"} {
		if !fullMatch(g, s) {
			t.Errorf("%q refused", s)
		}
	}
	if fullMatch(g, strings.Repeat("x", 41)+"z") {
		t.Error("41 x accepted")
	}
}

// FuzzParseGBNF: no input makes the parser panic, and a grammar it
// accepts gives a recognizer that steps over any bytes without
// panicking and agrees with itself between Try and Feed.
func FuzzParseGBNF(f *testing.F) {
	for _, s := range []string{`root ::= "a" [b-d]* | ("e" x){1,3}` + "\nx ::= [^\\n]?", `root ::= .+ "\u00e9"`, `root ::= "a"{2,} # c`, "root ::= (", `root ::= [\x`} {
		f.Add(s, []byte("abcé\xff"))
	}
	f.Fuzz(func(t *testing.T, src string, input []byte) {
		g, err := ParseGBNF(src)
		if err != nil {
			return
		}
		r := NewGrammarRecognizer(g)
		for i := range input {
			_, tried := r.Try(input[i:i+1], true)
			if fed := r.Feed(input[i : i+1]); fed != tried {
				t.Fatalf("byte %d: Try %v, Feed %v", i, tried, fed)
			} else if !fed {
				return
			}
		}
	})
}

// jsonGBNF is JSON objects written as a grammar, to set the grammar
// recognizer beside the JSON one.
const jsonGBNF = `root ::= "{" ws ( pair ( "," ws pair )* )? "}"
pair ::= str ":" ws value ws
value ::= str | num | "true" | "false" | "null" | root | "[" ws ( value ws ( "," ws value ws )* )? "]"
str ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
num ::= "-"? [0-9]+ ( "." [0-9]+ )?
ws ::= " "?
`

// BenchmarkGrammarMask: one mask step over a vocabulary of 150k random
// tokens, in a string value and between keys of an object, with a JSON
// grammar (from a fresh recognizer, and again at the same place) and
// with the JSON recognizer.
func BenchmarkGrammarMask(b *testing.B) {
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
	g, err := ParseGBNF(jsonGBNF)
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, len(tokens))
	for _, prefix := range []string{`{"name": "ab`, `{"name": "ab", `} {
		for _, kind := range []string{"grammar", "json"} {
			b.Run(kind+"/"+strings.TrimSpace(prefix[len(prefix)-3:]), func(b *testing.B) {
				for b.Loop() {
					var rec Recognizer = NewGrammarRecognizer(g)
					if kind == "json" {
						rec = NewJSON(true)
					}
					rec.Feed([]byte(prefix))
					m := NewMaskFor(rec, tokens, nil, 200)
					m.Apply(logits, nil)
				}
			})
		}
		// the frames a step makes serve the next steps: a mask applied
		// again at the same place measures a step with them in place
		b.Run("grammar-again/"+strings.TrimSpace(prefix[len(prefix)-3:]), func(b *testing.B) {
			rec := NewGrammarRecognizer(g)
			rec.Feed([]byte(prefix))
			m := NewMaskFor(rec, tokens, nil, 200)
			for b.Loop() {
				m.Apply(logits, nil)
			}
		})
	}
}
