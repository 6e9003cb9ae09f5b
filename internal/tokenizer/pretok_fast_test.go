package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aotlm/aotlm/internal/testutil"
)

// fastPatterns are the patterns with a hand-written splitter.
var fastPatterns = []string{pretokGPT2, pretokLlama3, pretokQwen2, pretokGPT4o, pretokDigit, `\p{N}+`}

// splitterPair returns the hand-written splitter of pattern and regexp2's.
func splitterPair(t testing.TB, pattern string) (fast, ref pretokMatcher) {
	t.Helper()
	fast = fastSplitter(pattern)
	if fast == nil {
		t.Fatalf("no hand-written splitter for %q", pattern)
	}
	ref, err := pretokCompileRegex(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return fast, ref
}

// sameSplit fails when the two matchers give different spans on s.
func sameSplit(t testing.TB, pattern string, fast, ref pretokMatcher, s string) {
	t.Helper()
	got, want := fast.find(nil, s), ref.find(nil, s)
	if slices.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	span := func(l [][2]int) string {
		if i >= len(l) {
			return "none"
		}
		return fmt.Sprintf("%v %q", l[i], s[l[i][0]:l[i][1]])
	}
	at := 0
	if i > 0 {
		at = want[i-1][1]
	}
	t.Fatalf("pattern %q: match %d differs (text from byte %d: %q):\n hand-written %s\n regexp2      %s",
		pattern, i, at, s[at:min(len(s), at+40)], span(got), span(want))
}

// fixtureTexts returns the llama.cpp fixture inputs and the reference
// encoding texts.
func fixtureTexts(t *testing.T) []string {
	inp := string(testutil.ReadFile(t, "tokenizer-fixtures/ggml-vocab-qwen2.gguf.inp"))
	texts := strings.Split(inp, "\n__ggml_vocab_test__\n")
	for _, cases := range bpeEncodings(t) {
		for _, c := range cases {
			texts = append(texts, c.text)
		}
	}
	return texts
}

func TestSplitterMatchesRegexpFixtures(t *testing.T) {
	texts := fixtureTexts(t)
	if len(texts) < 46 {
		t.Fatalf("only %d fixture texts", len(texts))
	}
	for _, pat := range fastPatterns {
		fast, ref := splitterPair(t, pat)
		for _, s := range texts {
			sameSplit(t, pat, fast, ref, s)
		}
	}
}

func TestSplitterMatchesRegexpWarAndPeace(t *testing.T) {
	text := string(testutil.ReadFile(t, "text/war-and-peace.txt"))
	for _, pat := range fastPatterns {
		fast, ref := splitterPair(t, pat)
		sameSplit(t, pat, fast, ref, text)
	}
}

// TestPretokClassEveryRune checks the class table against regexp2 on every
// Unicode code point: each class regex must match exactly the characters
// whose class bit is set.
func TestPretokClassEveryRune(t *testing.T) {
	var sb strings.Builder
	var runes []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue // surrogates cannot be written in UTF-8
		}
		sb.WriteRune(r)
		runes = append(runes, r)
	}
	all := sb.String()
	offs := make(map[int]rune, len(runes))
	for i, r := range all {
		offs[i] = r
	}
	tab := newPCTable()
	for _, tc := range []struct {
		pattern string
		in      func(c uint8) bool
	}{
		{`\p{L}`, func(c uint8) bool { return c&pcL != 0 }},
		{`\p{N}`, func(c uint8) bool { return c&pcN != 0 }},
		{`\s`, func(c uint8) bool { return c&pcS != 0 }},
		{`[\r\n]`, func(c uint8) bool { return c&pcNL != 0 }},
		{`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, func(c uint8) bool { return c&pcU != 0 }},
		{`[\p{Ll}\p{Lm}\p{Lo}\p{M}]`, func(c uint8) bool { return c&pcW != 0 }},
		{`[^\s\p{L}\p{N}]`, pcOther},
		{`[^\r\n\p{L}\p{N}]`, pcPrefix},
	} {
		ref, err := pretokCompileRegex(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		matched := map[int]bool{}
		for _, sp := range ref.find(nil, all) {
			matched[sp[0]] = true
		}
		n := 0
		for i := 0; i < len(all); {
			c, size := tab.at(all, i)
			if tc.in(c) != matched[i] {
				t.Errorf("%s: U+%04X: table says %v, regexp2 %v", tc.pattern, offs[i], tc.in(c), matched[i])
				if n++; n > 5 {
					break
				}
			}
			i += size
		}
		if len(matched) == 0 {
			t.Errorf("%s matched nothing", tc.pattern)
		}
	}
	// A byte that is not UTF-8 is U+FFFD: "other", like the real U+FFFD.
	if c, size := tab.at("\xff", 0); size != 1 || c != 0 {
		t.Errorf("invalid byte: class %b size %d", c, size)
	}
}

// TestContractionFolding checks (?i:'s|...) against regexp2 for every
// character that lowers to one of the contraction letters, and for their
// upper-case forms.
func TestContractionFolding(t *testing.T) {
	const pat = `(?i:'s|'t|'re|'ve|'m|'ll|'d)`
	ref, err := pretokCompileRegex(pat)
	if err != nil {
		t.Fatal(err)
	}
	var letters []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if strings.ContainsRune("strvemld", unicode.ToLower(r)) || strings.ContainsRune("strvemld", r) {
			letters = append(letters, r)
		}
	}
	if len(letters) < 16 {
		t.Fatalf("only %d letters", len(letters))
	}
	for _, a := range letters {
		for _, b := range append(letters, 'x', '\'') {
			s := "'" + string(a) + string(b)
			want := 0
			if m := ref.find(nil, s); len(m) > 0 && m[0][0] == 0 {
				want = m[0][1]
			}
			if got := pretokContraction(s, 0, true); got != want {
				t.Fatalf("%q: contraction length %d, regexp2 %d", s, got, want)
			}
		}
	}
}

// splitAlphabet holds characters of every class the splitters tell apart,
// for building hostile inputs: upper, lower, title-case, modifier and other
// letters, combining marks, digits of all kinds, spaces of all kinds, \r
// \n, apostrophes, slashes, symbols, U+FFFD.
var splitAlphabet = []rune("aZsStTrReEvVmMlLdD'’/ \t\n\r\v\f\u0085\u00a0\u2028\u3000" +
	"ǅᾈʰˆ々ー中ñÉ\u0301\u0300\u0903\u20dd0٣⅔Ⅻ²!?.,-_<>|$+~^=🙂\ufffdİK" + "ſﬀ")

// FuzzSplitterMatchesRegexp compares the split boundaries of every
// hand-written splitter with regexp2's, on the raw input (valid UTF-8 or
// not) and on the input read as indices into splitAlphabet. It also checks
// that preWalk gives the pieces of preSplit for every preset.
func FuzzSplitterMatchesRegexp(f *testing.F) {
	fuzzSeedsText(f)
	for _, s := range []string{
		"'S'T'RE'Ve'M'LL'd 'll' 'x", "ǅǅaǅ'S ʰʰA ʰA1 A\u0301b \u0301\u0301 \u03011",
		"  \r\n\t \n  x\n\n \t", "a/\r\n/x /// \r", "١٢٣٤⅔⅔⅔12345", "\xff\xfe'\xffs \xc3",
		" \u00a0\u3000x", "İs'İ KELVIN's", "x\u0085\u0085y",
	} {
		f.Add([]byte(s))
	}
	type pair struct {
		pattern   string
		fast, ref pretokMatcher
	}
	var pairs []pair
	for _, pat := range fastPatterns {
		fast, ref := splitterPair(f, pat)
		pairs = append(pairs, pair{pat, fast, ref})
	}
	var presets []preTokenizer
	for _, n := range []string{"default", "llama-bpe", "qwen2", "gpt-2", "smollm", "gpt-4o", "falcon"} {
		presets = append(presets, mustPreset(n).preTokenizer())
	}
	presets = append(presets,
		preSequence{preSplitter{m: pretokPattern(pretokQwen2), behavior: pretokIsolated}, preByteLevel{}},
		preSequence{preDigits{individual: true}, preByteLevel{addPrefixSpace: true, useRegex: true}},
		preSplitter{m: pretokPattern(pretokGPT2), behavior: pretokMergedWithPrevious},
		preSplitter{m: pretokPattern(pretokGPT4o), behavior: pretokRemoved, invert: true})
	f.Fuzz(func(t *testing.T, data []byte) {
		mapped := make([]rune, len(data))
		for i, c := range data {
			mapped[i] = splitAlphabet[int(c)%len(splitAlphabet)]
		}
		for _, s := range []string{string(data), string(mapped)} {
			for _, p := range pairs {
				sameSplit(t, p.pattern, p.fast, p.ref, s)
			}
			for i, p := range presets {
				want := p.preSplit(nil, s, true)
				var got []string
				preWalk(p, s, true, func(piece string) { got = append(got, piece) })
				if !slices.Equal(got, want) {
					t.Fatalf("preset %d: preWalk %q, preSplit %q", i, got, want)
				}
			}
		}
	})
}

// TestEncodeFastMatchesRegexp encodes with the hand-written splitter and
// with regexp2 and compares the ids, for each byte-level family in the test
// data (Qwen2, Llama 3, Phi-4's o200k).
func TestEncodeFastMatchesRegexp(t *testing.T) {
	text := string(testutil.ReadFile(t, "text/war-and-peace.txt")[:400000])
	extra := "Don't SHOUT: IT'S 12345 DIGITS\n\n\tcafé ÀÉ 東京 🙂 ǅǅa ʰA x\u0301y \xff\xfe ١٢٣ a/\r\n/b"
	for _, tc := range []struct{ dir, pattern string }{
		{"tokenizers/qwen2.5", pretokQwen2},
		{"tokenizers/llama3.2", pretokLlama3},
		{"tokenizers/phi4-mini", pretokGPT4o},
	} {
		b := bpeLoad(t, tc.dir)
		ps, ok := b.pre.(preSplitter)
		if !ok {
			t.Fatalf("%s: pre-tokenizer %T", tc.dir, b.pre)
		}
		if _, ok := ps.m.(pretokScan); !ok {
			t.Fatalf("%s: pre-tokenizer uses %T, want the hand-written splitter", tc.dir, ps.m)
		}
		ref, err := pretokCompileRegex(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{text, extra} {
			got := b.Encode(s, EncodeOptions{})
			b.pre = preSplitter{m: ref, behavior: pretokIsolated}
			want := b.Encode(s, EncodeOptions{})
			b.pre = ps
			if !slices.Equal(got, want) {
				t.Errorf("%s: %d ids with the hand-written splitter, %d with regexp2", tc.dir, len(got), len(want))
			}
		}
	}
}

// BenchmarkSplitter times the pre-tokenizer alone on War and Peace, hand
// written and regexp2.
func BenchmarkSplitter(b *testing.B) {
	text := string(testutil.ReadFile(b, "text/war-and-peace.txt"))
	for _, tc := range []struct{ name, pattern string }{
		{"gpt-2", pretokGPT2}, {"llama3", pretokLlama3}, {"qwen2", pretokQwen2}, {"gpt-4o", pretokGPT4o},
	} {
		fast, ref := splitterPair(b, tc.pattern)
		for _, m := range []struct {
			kind string
			m    pretokMatcher
		}{{"fast", fast}, {"regexp2", ref}} {
			b.Run(tc.name+"/"+m.kind, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				var spans [][2]int
				for b.Loop() {
					spans = m.m.find(spans[:0], text)
				}
			})
		}
	}
}

// TestSplitterLongRuns compares the splitters with regexp2 on long runs
// that make backtracking regexes work hard: one class repeated, and
// alternations of letter classes that share Lm, Lo and marks.
func TestSplitterLongRuns(t *testing.T) {
	const n = 5000
	runs := []string{
		strings.Repeat(" ", n) + "x", strings.Repeat(" \t", n) + "\n", strings.Repeat("\r\n ", n),
		strings.Repeat("A", n) + "a", "ʰ" + strings.Repeat("A", n) + "1", strings.Repeat("ʰA", n),
		strings.Repeat("\u0301", n) + "1", strings.Repeat("中", n) + "'S", strings.Repeat("1", n),
		strings.Repeat("!?", n) + "\r\n//", strings.Repeat("\xff", n), strings.Repeat("'s", n),
	}
	for _, pat := range fastPatterns {
		fast, ref := splitterPair(t, pat)
		for _, s := range runs {
			sameSplit(t, pat, fast, ref, s)
		}
	}
}
