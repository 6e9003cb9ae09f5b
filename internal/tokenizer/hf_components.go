package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/aotlm/aotlm/internal/limits"
)

func (p hfParser) component(raw json.RawMessage, field string) (*hfComponent, error) {
	if isNull(raw) {
		return nil, nil
	}
	if p.depth > limits.MaxTokenizerNesting {
		return nil, &limits.Error{What: fmt.Sprintf("tokenizer.json: %.200s: the nesting of Sequence components", field),
			Limit: fmt.Sprintf("MaxTokenizerNesting (%d)", limits.MaxTokenizerNesting)}
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, p.errf(field, "%v", err)
	}
	if c.Type == "" {
		return nil, p.errf(field+".type", "missing")
	}
	return &c, nil
}

// pattern reads {"String": s} or {"Regex": r}.
func (p hfParser) pattern(raw json.RawMessage, field string) (literal string, regex *string, err error) {
	var pat hfPattern
	if err := json.Unmarshal(raw, &pat); err != nil {
		return "", nil, p.errf(field, "%v", err)
	}
	switch {
	case pat.String != nil:
		return *pat.String, nil, nil
	case pat.Regex != nil:
		return "", pat.Regex, nil
	}
	return "", nil, p.errf(field, "neither String nor Regex")
}

// stringContent reads a "content" field holding a string.
func (p hfParser) stringContent(raw json.RawMessage, field string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", p.errf(field, "not a string")
	}
	return s, nil
}

func (p hfParser) normalizer(raw json.RawMessage, field string) (hfNormalizer, error) {
	c, err := p.component(raw, field)
	if c == nil || err != nil {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return normUnicode{norm.NFC}, nil
	case "NFD":
		return normUnicode{norm.NFD}, nil
	case "NFKC":
		return normUnicode{norm.NFKC}, nil
	case "NFKD":
		return normUnicode{norm.NFKD}, nil
	case "Lowercase":
		return normLowercase{}, nil
	case "Prepend":
		return normPrepend{c.Prepend}, nil
	case "Strip":
		return normStrip{left: c.StripLeft, right: c.StripRight}, nil
	case "Replace":
		lit, re, err := p.pattern(c.Pattern, field+".pattern")
		if err != nil {
			return nil, err
		}
		content, err := p.stringContent(c.Content, field+".content")
		if err != nil {
			return nil, err
		}
		n := normReplace{literal: lit, content: content}
		if re != nil {
			if n.re, err = compileRegex(*re); err != nil {
				return nil, p.errf(field+".pattern", "%v", err)
			}
		}
		return n, nil
	case "Precompiled":
		if c.Charsmap == nil || *c.Charsmap == "" {
			return nil, nil
		}
		return nil, p.unsupported("%s: Precompiled normalizer with a character map", field)
	case "Sequence":
		var seq normSequence
		for i, r := range c.Normalizers {
			n, err := p.nested().normalizer(r, fmt.Sprintf("%s.normalizers[%d]", field, i))
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return seq, nil
	}
	return nil, p.unsupported("%s: normalizer %q", field, c.Type)
}

var hfBehaviors = map[string]pretokBehavior{
	"Removed": pretokRemoved, "Isolated": pretokIsolated, "MergedWithPrevious": pretokMergedWithPrevious,
	"MergedWithNext": pretokMergedWithNext, "Contiguous": pretokContiguous,
}

func (p hfParser) metaspace(c *hfComponent, field string) (preMetaspace, error) {
	m := preMetaspace{replacement: c.Replacement, scheme: metaspaceAlways, split: true}
	if m.replacement == "" {
		m.replacement = "▁"
	}
	if utf8.RuneCountInString(m.replacement) != 1 {
		// one character, as in Hugging Face's tokenizers: a longer one
		// would multiply the text by its length at every space
		return m, p.errf(field+".replacement", "%.40q is not one character", m.replacement)
	}
	if c.Split != nil {
		m.split = *c.Split
	}
	switch c.PrependScheme {
	case "always":
	case "first":
		m.scheme = metaspaceFirst
	case "never":
		m.scheme = metaspaceNever
	case "":
		if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
			m.scheme = metaspaceNever
		}
	default:
		return m, p.errf(field+".prepend_scheme", "unknown value %q", c.PrependScheme)
	}
	return m, nil
}

func (p hfParser) preTokenizer(raw json.RawMessage, field string, byteLevel *bool) (preTokenizer, error) {
	c, err := p.component(raw, field)
	if c == nil || err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		*byteLevel = true
		bl := preByteLevel{useRegex: true}
		if c.AddPrefixSpace != nil {
			bl.addPrefixSpace = *c.AddPrefixSpace
		}
		if c.UseRegex != nil {
			bl.useRegex = *c.UseRegex
		}
		return bl, nil
	case "Split":
		beh, ok := hfBehaviors[c.Behavior]
		if !ok {
			return nil, p.errf(field+".behavior", "unknown value %q", c.Behavior)
		}
		lit, re, err := p.pattern(c.Pattern, field+".pattern")
		if err != nil {
			return nil, err
		}
		var m pretokMatcher = pretokLiteral(lit)
		if re != nil {
			if m, err = pretokCompile(*re); err != nil {
				return nil, p.errf(field+".pattern", "%v", err)
			}
		} else if lit == "" {
			return nil, p.errf(field+".pattern", "empty")
		}
		return preSplitter{m: m, behavior: beh, invert: c.Invert}, nil
	case "Metaspace":
		return p.metaspace(c, field)
	case "Digits":
		return preDigits{individual: c.Individual}, nil
	case "Whitespace":
		return preWhitespace{}, nil
	case "WhitespaceSplit":
		return preWhitespaceSplit{}, nil
	case "Punctuation":
		beh := pretokIsolated
		if c.Behavior != "" {
			var ok bool
			if beh, ok = hfBehaviors[c.Behavior]; !ok {
				return nil, p.errf(field+".behavior", "unknown value %q", c.Behavior)
			}
		}
		return prePunctuation{behavior: beh}, nil
	case "Sequence":
		var seq preSequence
		for i, r := range c.PreTokenizers {
			t, err := p.nested().preTokenizer(r, fmt.Sprintf("%s.pretokenizers[%d]", field, i), byteLevel)
			if err != nil {
				return nil, err
			}
			if t != nil {
				seq = append(seq, t)
			}
		}
		return seq, nil
	}
	return nil, p.unsupported("%s: pre-tokenizer %q", field, c.Type)
}

func (p hfParser) decoder(raw json.RawMessage, field string, byteLevel *bool) (hfDecoder, error) {
	c, err := p.component(raw, field)
	if c == nil || err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		*byteLevel = true
		return decByteLevel{}, nil
	case "ByteFallback":
		return decByteFallback{}, nil
	case "Fuse":
		return decFuse{}, nil
	case "Strip":
		content, err := p.stringContent(c.Content, field+".content")
		if err != nil {
			return nil, err
		}
		if c.Start < 0 || c.Stop < 0 {
			return nil, p.errf(field, "negative start/stop")
		}
		return decStrip{content: content, start: c.Start, stop: c.Stop}, nil
	case "Replace":
		lit, re, err := p.pattern(c.Pattern, field+".pattern")
		if err != nil {
			return nil, err
		}
		if re != nil {
			// A regex that is a plain literal is accepted as one.
			if regexp.QuoteMeta(*re) != *re {
				return nil, p.unsupported("%s: Replace decoder with a regex", field)
			}
			lit = *re
		}
		content, err := p.stringContent(c.Content, field+".content")
		if err != nil {
			return nil, err
		}
		return decReplace{pattern: lit, content: content}, nil
	case "Metaspace":
		m, err := p.metaspace(c, field)
		if err != nil {
			return nil, err
		}
		return decMetaspace{replacement: m.replacement, stripFirst: m.scheme != metaspaceNever}, nil
	case "Sequence":
		var seq decSequence
		for i, r := range c.Decoders {
			d, err := p.nested().decoder(r, fmt.Sprintf("%s.decoders[%d]", field, i), byteLevel)
			if err != nil {
				return nil, err
			}
			if d != nil {
				seq = append(seq, d)
			}
		}
		return seq, nil
	}
	return nil, p.unsupported("%s: decoder %q", field, c.Type)
}

// postProcessor returns the ids put before and after a single sequence.
func (p hfParser) postProcessor(raw json.RawMessage, field string) (prefix, suffix []int, err error) {
	c, err := p.component(raw, field)
	if c == nil || err != nil {
		return nil, nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil, nil
	case "TemplateProcessing":
		seen := false
		for i, item := range c.Single {
			f := fmt.Sprintf("%s.single[%d]", field, i)
			var it struct {
				Sequence     *struct{ ID string } `json:"Sequence"`
				SpecialToken *struct{ ID string } `json:"SpecialToken"`
			}
			if err := json.Unmarshal(item, &it); err != nil {
				return nil, nil, p.errf(f, "%v", err)
			}
			switch {
			case it.Sequence != nil:
				if seen {
					return nil, nil, p.errf(f, "second sequence in a single template")
				}
				seen = true
			case it.SpecialToken != nil:
				tok, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, nil, p.errf(f, "special token %q not in special_tokens", it.SpecialToken.ID)
				}
				if seen {
					suffix = append(suffix, tok.IDs...)
				} else {
					prefix = append(prefix, tok.IDs...)
				}
			default:
				return nil, nil, p.errf(f, "neither Sequence nor SpecialToken")
			}
		}
		return prefix, suffix, nil
	case "RobertaProcessing", "BertProcessing":
		cls, err := p.tokenPair(c.Cls, field+".cls")
		if err != nil {
			return nil, nil, err
		}
		sep, err := p.tokenPair(c.Sep, field+".sep")
		if err != nil {
			return nil, nil, err
		}
		return []int{cls}, []int{sep}, nil
	case "Sequence":
		for i, r := range c.Processors {
			pre, suf, err := p.nested().postProcessor(r, fmt.Sprintf("%s.processors[%d]", field, i))
			if err != nil {
				return nil, nil, err
			}
			prefix = append(prefix, pre...)
			suffix = append(suf, suffix...)
		}
		return prefix, suffix, nil
	}
	return nil, nil, p.unsupported("%s: post-processor %q", field, c.Type)
}

// tokenPair reads ["<s>", 0].
func (p hfParser) tokenPair(raw []json.RawMessage, field string) (int, error) {
	if len(raw) != 2 {
		return 0, p.errf(field, "not a [token, id] pair")
	}
	var id int
	if err := json.Unmarshal(raw[1], &id); err != nil || id < 0 {
		return 0, p.errf(field, "bad id")
	}
	return id, nil
}

// decoderGrowth is how many times longer a decoder chain can make a token:
// the product of its Replace steps' content-to-pattern ratios (the other
// decoders keep or shorten a token), saturating above
// limits.MaxDecoderGrowth.
func decoderGrowth(d hfDecoder) int {
	switch d := d.(type) {
	case decReplace:
		if d.pattern == "" {
			return 1
		}
		return max(1, (len(d.content)+len(d.pattern)-1)/len(d.pattern))
	case decSequence:
		g := 1
		for _, s := range d {
			g = min(g*decoderGrowth(s), limits.MaxDecoderGrowth+1)
		}
		return g
	}
	return 1
}
