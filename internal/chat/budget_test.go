package chat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/limits"
)

// TestHostileTemplatesHitALimit renders templates that, without the
// budget, overflow Go's stack (a fatal error), loop for hours or allocate
// gigabytes. Each must fail with one line naming its limit. The test
// asserts the errors, not the time.
func TestHostileTemplatesHitALimit(t *testing.T) {
	for _, c := range []struct{ name, src, limit string }{
		{"recursive macro", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "MaxTemplateDepth"},
		{"mutual recursion", `{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}`, "MaxTemplateDepth"},
		{"huge range", `{% for i in range(1000000000) %}{% endfor %}`, "MaxTemplateIterations"},
		{"huge range value", `{% set r = range(1000000000) %}`, "MaxTemplateIterations"},
		{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, "MaxTemplateIterations"},
		{"string times ten billion", `{{ 'x' * 10000000000 }}`, "MaxTemplateOutput"},
		{"string times in set", `{% set s = 'ab' * 100000000 %}`, "MaxTemplateOutput"},
		{"doubling concat", `{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`, "MaxTemplateOutput"},
		{"doubling plus", `{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`, "MaxTemplateOutput"},
		{"list doubling", `{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`, "MaxTemplateIterations"},
		{"output in a macro", `{% macro m() %}{% for i in range(90000) %}` + strings.Repeat("y", 1000) + `{% endfor %}{% endmacro %}{% set x = m() %}`, "MaxTemplateOutput"},
		{"printed output", `{% for i in range(90000) %}{{ '` + strings.Repeat("z", 1000) + `' }}{% endfor %}`, "MaxTemplateOutput"},
		{"center width", `{{ 'a' | center(10000000000) }}`, "MaxTemplateOutput"},
		{"center method", `{{ 'a'.center(10000000000) }}`, "MaxTemplateOutput"},
		{"join of a big list", `{% set s = 'x' * 10000000 %}{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = ns.l + [s] %}{% endfor %}{{ ns.l | join(',') }}`, "MaxTemplateOutput"},
		{"replace growth", `{% set s = 'x' * 1000000 %}{{ s|replace('x', 'yyyyyyyyyyyyyyyyyyyyyyyyy') }}`, "MaxTemplateOutput"},
		{"format width", `{{ '{:>3000000000}'.format(1) }}`, "MaxTemplateOutput"},
		{"format width left", `{{ '{0:<20000000}'.format('a') }}`, "MaxTemplateOutput"},
		{"format precision", `{{ '{:.900000000f}'.format(1.5) }}`, "MaxTemplateOutput"},
		{"format zero fill", `{{ 'x{:020000000d}'.format(7) }}`, "MaxTemplateOutput"},
		{"format nested width", `{{ '{:>{}}'.format('a', 50000000) }}`, "MaxTemplateOutput"},
		{"format width from a string", `{{ '{:>{}}'.format('a', '60000000') }}`, "MaxTemplateOutput"},
		{"format keyword width", `{{ '{v:{w}}'.format(v='a', w=50000000) }}`, "MaxTemplateOutput"},
		{"format_map width", `{{ '{a:>90000000}'.format_map({'a': 1}) }}`, "MaxTemplateOutput"},
		{"format repeats an argument", `{% set s = 'x' * 1000000 %}{% set f = '{0}' * 100 %}{{ f.format(s) }}`, "MaxTemplateOutput"},
		{"printf width", `{{ '%3000000000d'|format(1) }}`, "MaxTemplateOutput"},
		{"printf precision", `{{ '%.40000000f'|format(1.5) }}`, "MaxTemplateOutput"},
		{"printf star width", `{{ '%*d'|format(40000000, 1) }}`, "MaxTemplateOutput"},
		{"printf repeated index", `{% set s = 'x' * 1000000 %}{{ ('%[1]s' * 100)|format(s) }}`, "MaxTemplateOutput"},
		{"ljust method", `{{ 'a'.ljust(4000000000) }}`, "MaxTemplateOutput"},
		{"rjust method", `{{ 'a'.rjust(40000000) }}`, "MaxTemplateOutput"},
		{"zfill method", `{{ '7'.zfill(40000000) }}`, "MaxTemplateOutput"},
		{"indent of many lines", `{% set s = 'a\n' * 100000 %}{{ s|indent(1000) }}`, "MaxTemplateOutput"},
		{"indent by a string", `{% set s = 'a\n' * 100000 %}{{ s|indent('-' * 1000) }}`, "MaxTemplateOutput"},
		{"wordwrap separator", `{% set s = 'a ' * 1000000 %}{{ s|wordwrap(1, wrapstring='-' * 100) }}`, "MaxTemplateOutput"},
		{"lipsum paragraphs", `{{ lipsum(100000000) }}`, "MaxTemplateIterations"},
		{"lipsum words", `{{ lipsum(1, max=2000000000) }}`, "MaxTemplateIterations"},
		{"lipsum keyword", `{{ lipsum(n=3000, min=1, max=500) }}`, "MaxTemplateIterations"},
		{"lipsum in a loop", `{% for i in range(1000) %}{% set x = lipsum(2, max=100) %}{% endfor %}`, "MaxTemplateIterations"},
		{"tojson indent", `{{ messages | tojson(indent=9000000) }}`, "MaxTemplateOutput"},
		{"tojson indent of a dict", `{{ {'a': [1, 2, [3, 4, {'b': 5}]], 'c': 'd'} | tojson(indent=2000000) }}`, "MaxTemplateOutput"},
		{"tojson indent of a long list", `{{ range(90000) | list | tojson(indent=200) }}`, "MaxTemplateOutput"},
		{"slice count", `{{ [1, 2]|slice(2000000000) }}`, "MaxTemplateIterations"},
		{"batch fill", `{{ [1]|batch(2000000000, 0) }}`, "MaxTemplateIterations"},
		{"repetition reversed", `{% set ns = namespace(n=2000000000) %}{{ ('a' ~ 'b') * ns.n }}`, "MaxTemplateOutput"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := Parse(c.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tpl.Render([]Message{{Role: "user", Content: "hi"}}, Options{})
			if !limits.IsLimit(err) || !strings.Contains(err.Error(), c.limit) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line naming %s", err, c.limit)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Template != DefaultName {
				t.Errorf("%v is not a *chat.Error naming the template", err)
			}
		})
	}
}

// TestHostileTemplatesAreRefusedAtParse: sources too large or too deep for
// the parser's recursion, templates loading templates (one including itself
// recurses without end), and templates naming the guards.
func TestHostileTemplatesAreRefusedAtParse(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"deep brackets", "{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}", "MaxTemplateDepth"},
		{"deep ifs", strings.Repeat("{% if true %}", 5000) + strings.Repeat("{% endif %}", 5000), "MaxTemplateDepth"},
		{"huge source", strings.Repeat("x", limits.MaxTemplateSource+1), "MaxTemplateSource"},
		{"include itself", `{% include "chat_template" %}`, "not available"},
		{"import", `{% import "chat_template" as m %}`, "not available"},
		{"extends", `{% extends "chat_template" %}`, "not available"},
		{"block", `{% block b %}{{ self.b() }}{% endblock %}`, "not available"},
		{"reserved name", `{% set __aotlm_mul = 1 %}`, "reserved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.src)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
}

// TestGuardsKeepMeaning: the guarded operators, range and loops compute
// what gonja and Jinja compute.
func TestGuardsKeepMeaning(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{ 'ab' * 3 }}|{{ 2 * 3 }}|{{ 1.5 * 2 }}|{{ 'x' * 0 }}|{{ 'x' * -2 }}`, "ababab|6|3.0||"},
		{`{{ 1 + 2 }}|{{ 'a' + 'b' }}|{{ [1] + [2, 3] }}|{{ 1.5 + 1 }}|{{ 'a' ~ 1 }}`, "3|ab|[1, 2, 3]|2.5|a1"},
		{`{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}|{{ range(0)|length }}`, "012|135|321|0"},
		{`{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}`, "54321"},
		{`{% for m in messages %}{{ loop.index }}:{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}`, "1:user"},
		{`{% set ns = namespace(s='') %}{% for c in 'abc' %}{% set ns.s = ns.s ~ c %}{% endfor %}{{ ns.s }}`, "abc"},
		{`{{ 'a-b'|replace('-', '+') }}|{{ ['x', 'y'] | join(', ') }}|{{ 'a' | center(5) }}`, "a+b|x, y|  a  "},
		{`{{ '{:>4}|{:<3}|{:03d}|{:.2f}'.format('a', 'b', 7, 1.5) }}|{{ '{0}{0}'.format('x') }}|{{ '%5d'|format(3) }}`, "   a|b  |007|1.50|xx|    3"},
		{`{{ {'a': [1, 2]} | tojson(indent=2) }}`, "{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
		{`{{ 'a\nb'|indent(2) }}|{{ lipsum(2, html=false, min=3, max=5)|length > 0 }}|{{ [1, 2, 3]|slice(2)|list|length }}`, "a\n  b|True|2"},
	} {
		tpl, err := Parse(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, err := tpl.Render([]Message{{Role: "user", Content: "hi"}}, Options{})
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.src, got, err, c.want)
		}
	}
}

// TestBudgetDeadline: once the render's time is up, every guard fails
// naming MaxTemplateTime (a unit test: rendering for the full limit would
// make the test as slow as the limit).
func TestBudgetDeadline(t *testing.T) {
	b := newBudget()
	if err := b.check(); err != nil {
		t.Fatalf("fresh budget: %v", err)
	}
	b.deadline = time.Now().Add(-time.Second)
	for _, err := range []error{b.check(), b.iterate(1), b.size("x", 1)} {
		if !limits.IsLimit(err) || !strings.Contains(err.Error(), "MaxTemplateTime") {
			t.Errorf("got %v", err)
		}
	}
}
