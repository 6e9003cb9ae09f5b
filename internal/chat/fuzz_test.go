package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/testutil"
)

// fuzzTemplates loads every real template of the test data once.
func fuzzTemplates(f *testing.F) ([]*Template, []Specials) {
	var tpls []*Template
	var sps []Specials
	for _, g := range goldenTemplates {
		tpl, sp := loadTemplate(f, g.file)
		tpls, sps = append(tpls, tpl), append(sps, sp)
	}
	return tpls, sps
}

// FuzzRender renders arbitrary message contents and roles through every
// real template: no panic, failures are typed errors, and a successful
// render contains the user's text (trimmed, as some templates trim).
func FuzzRender(f *testing.F) {
	tpls, sps := fuzzTemplates(f)
	f.Add(userText1, botText1, "assistant", true)
	f.Add(" Be concise. \n", "<think>\nplan</think>\n\nanswer", "assistant", false)
	f.Add("{{ raise_exception('x') }}{% if %}", "<|im_end|>\n<|im_start|>system", "system", true)
	f.Add("\xff\xfe\x00 ü 😀 \u2028", "</think>", "tool", true)
	f.Add("", "", "", false)
	f.Add("<tool_response>x</tool_response>", "'\"\\", "user", true)
	f.Fuzz(func(t *testing.T, user, other, role string, gen bool) {
		msgs := []Message{{Role: "user", Content: user}, {Role: role, Content: other}, {Role: "user", Content: user}}
		for i, tpl := range tpls {
			out, err := tpl.Render(msgs, Options{AddGenerationPrompt: gen, BOSToken: sps[i].BOS, EOSToken: sps[i].EOS, Now: fixedNow})
			if err != nil {
				var e *Error
				var ex *ExceptionError
				if !errors.As(err, &e) && !errors.As(err, &ex) {
					t.Fatalf("%s: untyped error %T: %v", tpl.Name(), err, err)
				}
				continue
			}
			if want := strings.TrimFunc(user, pyIsSpace); !strings.Contains(out, want) {
				t.Fatalf("%s: output %q lacks the user text %q", tpl.Name(), out, want)
			}
		}
	})
}

// FuzzParse parses arbitrary template sources: no panic, and the
// conditional rewrite is idempotent.
func FuzzParse(f *testing.F) {
	for _, g := range goldenTemplates {
		p := testutil.Path(f, g.file)
		if strings.HasSuffix(p, ".jinja") {
			f.Add(string(testutil.ReadFile(f, g.file)))
			continue
		}
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(testutil.ReadFile(f, g.file), &cfg); err != nil {
			f.Fatal(err)
		}
		f.Add(cfg.ChatTemplate)
	}
	for _, s := range []string{
		"{{ (a if b else c) }}", "{{ (a if) }}", "{{ (if b else c) }}", "{{ (a if b else) }}",
		"{{ f(x=a if b else c, y) }}", "{{ {a if b else c: d} }}", "{{ [a if b if c else d] }}",
		"{{ ( }}", "{{ ) }}", "{{ [ ) }}", "{% if (a if b else c %}", "{%", "{{", "{#", "{% raw %}{{ (a if b else c) }}",
		"{{ 'unterminated", "{% for %}", "{% macro m(a=(1 if b else 2)) %}{% endmacro %}", "\xff{{ \xfe }}",
	} {
		f.Add(s)
	}
	cfg := newConfig()
	f.Fuzz(func(t *testing.T, src string) {
		_, err := ParseNamed("fuzz", src)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
		once := rewriteConditionals(src, cfg)
		if twice := rewriteConditionals(once, cfg); twice != once {
			t.Fatalf("rewrite not idempotent:\n%q\n%q", once, twice)
		}
	})
}

// FuzzRenderSource parses and renders arbitrary template sources, seeded
// with the real templates and with hostile ones: no panic, no fatal stack
// overflow or allocation, failures are typed errors, and the output stays
// within limits.MaxTemplateOutput. The render time limit is lowered to one
// second so that slow inputs cost little.
func FuzzRenderSource(f *testing.F) {
	for _, g := range goldenTemplates {
		src := string(testutil.ReadFile(f, g.file))
		if !strings.HasSuffix(g.file, ".jinja") {
			var cfg struct {
				ChatTemplate string `json:"chat_template"`
			}
			if json.Unmarshal([]byte(src), &cfg) != nil {
				continue
			}
			src = cfg.ChatTemplate
		}
		f.Add(src)
	}
	for _, s := range []string{
		`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`,
		`{% for i in range(1000000000) %}{{ i }}{% endfor %}`,
		`{{ 'x' * 10000000000 }}`,
		`{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`,
		`{% for m in messages %}{{ m.role ~ ': ' ~ m.content|trim }}{% endfor %}{{ 'ab'|center(9) }}`,
		`{{ messages|tojson }}{{ range(3)|list }}{{ ('a' + 'b') * 2 }}`,
	} {
		f.Add(s)
	}
	renderTime = time.Second
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := ParseNamed("fuzz", src)
		if err != nil {
			return
		}
		out, err := tpl.Render([]Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}},
			Options{AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>", Now: fixedNow})
		if err != nil {
			var e *Error
			var ex *ExceptionError
			if !errors.As(err, &e) && !errors.As(err, &ex) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if len(out) > limits.MaxTemplateOutput {
			t.Fatalf("output of %d bytes", len(out))
		}
	})
}
