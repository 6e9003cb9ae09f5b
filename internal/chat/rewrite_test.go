package chat

import (
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2"
)

// TestGonjaNestedConditional is the minimal reproduction of the construct
// gonja v2 cannot parse: a conditional expression inside parentheses (Gemma
// 3: `(first_user_prefix if loop.first else "")`; Qwen 3.8 does the same
// around reasoning_instructions).
// If gonja learns it, this test fails and rewrite.go can go.
func TestGonjaNestedConditional(t *testing.T) {
	if _, err := gonja.FromString(`{{ 'a' }}{{ 'b' if true else 'c' }}{% set x = 1 if true else 2 %}`); err != nil {
		t.Fatalf("top-level conditional should parse: %v", err)
	}
	for _, src := range []string{
		`{{ ('b' if true else 'c') }}`,
		`{{ 'a' + ('b' if true else 'c') }}`,
		`{{ [1 if true else 2] }}`,
	} {
		_, err := gonja.FromString(src)
		if err == nil {
			t.Errorf("gonja now parses %s: drop the rewrite", src)
		}
	}
	if _, err := gonja.FromString(`{{ ('b' if true else 'c') }}`); err == nil || !strings.Contains(err.Error(), "Unbalanced parenthesis") {
		t.Errorf("error = %v, want gonja's \"Unbalanced parenthesis\"", err)
	}
}

// TestConditionalRewrite renders nested conditionals through Parse; the
// expected values follow Jinja's semantics (Python's `X if C else Y`).
func TestConditionalRewrite(t *testing.T) {
	tests := []struct{ src, want string }{
		{`{{ ('b' if true else 'c') }}`, "b"},
		{`{{ ('b' if false else 'c') }}`, "c"},
		{`{{ 'a' + ('b' if x == 1 else 'c') + 'd' }}`, "abd"},
		// chained conditionals associate to the right
		{`{{ ('one' if x == 1 else 'two' if x == 2 else 'many') }}|{{ ('one' if x == 2 else 'two' if x == 1 else 'many') }}|{{ ('one' if x == 2 else 'two' if x == 3 else 'many') }}`, "one|two|many"},
		// a false-y branch value is still returned
		{`{{ ('' if true else 'c') | length }}`, "0"},
		{`{{ (0 if true else 5) }}`, "0"},
		// only the chosen branch is evaluated
		{`{{ ('safe' if true else raise_exception('evaluated')) }}`, "safe"},
		{`{{ (raise_exception('evaluated') if false else 'safe') }}`, "safe"},
		// list items, call arguments, keyword arguments, dict values
		{`{{ [1 if true else 2, 3 if false else 4] | join(',') }}`, "1,4"},
		{`{{ 'a-b' | replace('-', '+' if x == 1 else '*') }}`, "a+b"},
		{`{{ {'k': 'v' if false else 'w'}['k'] }}`, "w"},
		{`{{ [1,2,3] | join(sep if sep is defined else ';') }}`, "1;2;3"},
		// nested parentheses inside the branches
		{`{{ ((('x' + 'y') | upper) if (x > 0) else ('z')) }}`, "XY"},
		// no else: undefined
		{`{{ ('b' if false) is undefined }}`, "True"},
		// strings that look like conditionals are untouched
		{`{{ ('b if c else d') }}{{ "(" }}`, "b if c else d("},
		// the top-level forms gonja handles itself are left alone
		{`{{ 'b' if false else 'c' }}{% set y = 'p' if true else 'q' %}{{ y }}`, "cp"},
		// mixed with a block on several lines
		{"{%- if true -%}\n{{ 'a' + ('b'\n if x == 1\n else 'c') }}\n{%- endif %}", "ab"},
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.src)
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		got, err := tpl.Render(nil, Options{Vars: map[string]any{"x": 1}})
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s = %q, want %q", tt.src, got, tt.want)
		}
	}
}

// TestRewriteUnchanged checks the rewrite leaves alone sources with nothing
// to rewrite, and is idempotent.
func TestRewriteUnchanged(t *testing.T) {
	cfg := newConfig()
	for _, src := range []string{
		"",
		"plain text (if you like) else",
		"{% if a %}{{ (b) }}{% endif %}",
		"{% for m in messages if m.role != 'system' %}{{ m.content }}{% endfor %}",
		"{{ x if y else z }}",
		"{{ (unbalanced }}",
	} {
		if got := rewriteConditionals(src, cfg); got != src {
			t.Errorf("rewrite(%q) = %q, want it unchanged", src, got)
		}
	}
	src := "{{ (a if b else (c if d else e)) ~ [f if g] }}"
	once := rewriteConditionals(src, cfg)
	if once == src || strings.Contains(once, " if ") {
		t.Errorf("rewrite(%q) = %q, want every nested conditional rewritten", src, once)
	}
	if twice := rewriteConditionals(once, cfg); twice != once {
		t.Errorf("rewrite is not idempotent: %q -> %q", once, twice)
	}
}
