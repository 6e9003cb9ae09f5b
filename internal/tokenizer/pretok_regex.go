package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/aotlm/aotlm/internal/limits"
)

// The pre-tokenizer regexes of the byte-level BPE families, as published in
// their tokenizer.json files (Split pattern or ByteLevel's built-in regex).
const (
	// pretokGPT2 is GPT-2's regex, built into the ByteLevel pre-tokenizer.
	pretokGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// pretokLlama3 is Llama 3's (also DBRX, GLM-4): digits in groups of three.
	pretokLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// pretokQwen2 is Qwen2/2.5/3's: as Llama 3 but single digits.
	pretokQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// pretokGPT4o is o200k's (GPT-4o, Phi-4, Llama 4): case-aware words.
	pretokGPT4o = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// pretokDigit isolates single digits (SmolLM, StarCoder: a Digits
	// pre-tokenizer before ByteLevel).
	pretokDigit = `\p{N}`
)

// pretokRegex finds the matches of a .NET-style regex (lookahead and
// \p{..} classes included). Offsets are bytes; invalid UTF-8 bytes count as
// one character each, so no input byte is lost.
// A match that takes longer than limits.RegexMatchTimeout (a backtracking
// pattern such as `(a+)+$`) stops the encoding with a *limits.Error, which
// EncodeChecked returns.
type pretokRegex struct{ re *regexp2.Regexp }

func (m pretokRegex) find(dst [][2]int, s string) [][2]int {
	runes := make([]rune, 0, len(s))
	offs := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += size
	}
	offs = append(offs, len(s))
	match, err := m.re.FindRunesMatch(runes)
	for err == nil && match != nil {
		st := match.Index
		dst = append(dst, [2]int{offs[st], offs[st+match.Length]})
		match, err = m.re.FindNextMatch(match)
	}
	if err != nil {
		panic(regexFailure(m.re, "pre-tokenizer", err))
	}
	return dst
}

// encodeAbort carries an error out of Encode to EncodeChecked.
type encodeAbort struct{ err error }

// regexFailure is the error of a tokenizer regex that failed (ran out of
// time) while encoding.
func regexFailure(re *regexp2.Regexp, role string, err error) encodeAbort {
	if strings.Contains(err.Error(), "timeout") {
		return encodeAbort{&limits.Error{What: fmt.Sprintf("tokenizer: a match of the %s regex %q", role, re.String()),
			Limit: fmt.Sprintf("RegexMatchTimeout (%v)", limits.RegexMatchTimeout)}}
	}
	return encodeAbort{fmt.Errorf("tokenizer: %s regex %q: %w", role, re.String(), err)}
}

// compileRegex compiles a tokenizer.json regex with the match time limit.
func compileRegex(pattern string) (*regexp2.Regexp, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = limits.RegexMatchTimeout
	return re, nil
}

// EncodeChecked is t.Encode, returning as an error what stops an encoding
// (a tokenizer regex over its time limit) instead of panicking with it.
func EncodeChecked(t Tokenizer, text string, opts EncodeOptions) (ids []int, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(encodeAbort)
			if !ok {
				panic(r)
			}
			ids, err = nil, a.err
		}
	}()
	return t.Encode(text, opts), nil
}

var pretokCache sync.Map // pattern -> pretokMatcher

// pretokCompile compiles a tokenizer.json regex: a hand-written splitter
// when the pattern is one of the known family patterns (fastSplitter),
// regexp2 otherwise.
func pretokCompile(pattern string) (pretokMatcher, error) {
	if m, ok := pretokCache.Load(pattern); ok {
		return m.(pretokMatcher), nil
	}
	m := fastSplitter(pattern)
	if m == nil {
		var err error
		if m, err = pretokCompileRegex(pattern); err != nil {
			return nil, err
		}
	}
	pretokCache.Store(pattern, m)
	return m, nil
}

// pretokCompileRegex compiles pattern with regexp2, the reference the
// hand-written splitters are tested against.
func pretokCompileRegex(pattern string) (pretokMatcher, error) {
	re, err := compileRegex(pattern)
	if err != nil {
		return nil, fmt.Errorf("pre-tokenizer regex %q: %w", pattern, err)
	}
	return pretokRegex{re}, nil
}

// pretokPattern compiles one of the built-in patterns above.
func pretokPattern(pattern string) pretokMatcher {
	m, err := pretokCompile(pattern)
	if err != nil {
		panic(err) // the built-in patterns are known to compile
	}
	return m
}

// bpePreset is a pre-tokenizer chosen by name (GGUF tokenizer.ggml.pre, or
// a model family): Split steps with isolated matches applied in order, and
// the family's defaults.
type bpePreset struct {
	patterns     []string
	ignoreMerges bool
	addBOS       bool
}

// pretokPreset maps llama.cpp's tokenizer.ggml.pre names to pre-tokenizers,
// following llama.cpp's llama-vocab.cpp. "" means "default".
func pretokPreset(name string) (bpePreset, bool) {
	switch name {
	case "", "default":
		return bpePreset{patterns: []string{`[\p{P}\$\+<=>\^~\|]+`, pretokGPT2, `\p{N}+`, `[0-9][0-9][0-9]`}}, true
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2":
		return bpePreset{patterns: []string{pretokLlama3}, ignoreMerges: true, addBOS: true}, true
	case "dbrx", "smaug-bpe", "chatglm-bpe", "glm4":
		return bpePreset{patterns: []string{pretokLlama3}}, true
	case "qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2":
		return bpePreset{patterns: []string{pretokQwen2}}, true
	case "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "roberta-bpe", "gigachat", "mellum", "trillion":
		return bpePreset{patterns: []string{pretokGPT2}}, true
	case "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b":
		return bpePreset{patterns: []string{pretokDigit, pretokGPT2}}, true
	case "gpt-4o", "llama4", "phi-4", "minimax-m2":
		return bpePreset{patterns: []string{pretokGPT4o}}, true
	case "falcon":
		return bpePreset{patterns: []string{`[\p{P}\$\+<=>\^~\|` + "`" + `]+`, pretokGPT2, `[0-9][0-9][0-9]`}}, true
	case "deepseek-coder":
		return bpePreset{patterns: []string{`[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`}}, true
	}
	return bpePreset{}, false
}

// preTokenizer builds the preset's Split sequence.
func (p bpePreset) preTokenizer() preTokenizer {
	var seq preSequence
	for _, pat := range p.patterns {
		seq = append(seq, preSplitter{m: pretokPattern(pat), behavior: pretokIsolated})
	}
	if len(seq) == 1 {
		return seq[0]
	}
	return seq
}
