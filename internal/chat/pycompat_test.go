package chat

import (
	"testing"
	"time"
)

func renderSrc(t *testing.T, src string, vars map[string]any) string {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	out, err := tpl.Render(nil, Options{Vars: vars, Now: fixedNow})
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return out
}

// TestPythonCompat checks the filters and methods replaced in env.go and
// tojson.go. Expected values are what Python 3 / jinja2 print for the same
// expressions (str.strip, json.dumps(..., ensure_ascii=False), repr(float)).
func TestPythonCompat(t *testing.T) {
	tests := []struct {
		src  string
		vars map[string]any
		want string
	}{
		{`{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.strip() }}`, map[string]any{"s": "\n\t a b \n"}, "a b \n|\n\t a b|a b"},
		{`{{ s.lstrip('\n') }}|{{ s.strip('\nx') }}`, map[string]any{"s": "\n\nxAx\n"}, "xAx\n|A"},
		{`{{ s.lstrip('é') }}`, map[string]any{"s": "ééx"}, "x"},
		{`{{ s | trim }}|{{ s | trim('x') }}`, map[string]any{"s": "x  y \u00a0"}, "x  y|  y \u00a0"},
		{`{{ s.split('</think>')[-1].lstrip('\n') }}`, map[string]any{"s": "<think>r</think>\n\nans"}, "ans"},
		{`{{ s.startswith('<tool') and s.endswith('>') }}`, map[string]any{"s": "<tool_response>"}, "True"},
		{`{{ d | tojson }}`, map[string]any{"d": map[string]any{"b": []any{1, 2.5, "x'y\"", nil, true}, "a": "é\n"}},
			`{"a": "é\n", "b": [1, 2.5, "x'y\"", null, true]}`},
		{`{{ {'z': 1, 'a': [1.0, 1e16, 1e-05, 0.0001]} | tojson }}`, nil, `{"z": 1, "a": [1.0, 1e+16, 1e-05, 0.0001]}`},
		{`{{ {'z': {'y': []}, 'a': {}} | tojson(indent=2) }}`, nil, "{\n  \"z\": {\n    \"y\": []\n  },\n  \"a\": {}\n}"},
		{`{{ {'z': 1, 'a': 2} | tojson(sort_keys=true) }}`, nil, `{"a": 2, "z": 1}`},
		{`{{ 'é😀' | tojson(ensure_ascii=true) }}`, nil, `"\u00e9\ud83d\ude00"`},
		{`{{ strftime_now("%d %b %Y") }}`, nil, "26 Jul 2024"},
		{`{% set ns = namespace(n=0) %}{% for m in [1,2,3] %}{% set ns.n = ns.n + m %}{% endfor %}{{ ns.n }}`, nil, "6"},
		{`{% for k, v in {'b': 1, 'a': 2} | items %}{{ k }}={{ v }};{% endfor %}`, nil, "b=1;a=2;"},
		{`{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}`, map[string]any{"d": map[string]any{"y": 1, "x": "2"}}, "x=2;y=1;"},
		{`{% for x in [1,2,3] %}{{ loop.index0 }}{% if not loop.last %},{% endif %}{% endfor %}`, nil, "0,1,2"},
		{`{{ d.get('a') }}{{ d.get('zz', 'no') }}`, map[string]any{"d": map[string]any{"a": "A"}}, "Ano"},
		{`{{ 'x' ~ y | default('dflt') }}`, nil, "xdflt"},
		// trim_blocks / lstrip_blocks, as Hugging Face sets them
		{"  {% if true %}\nA\n  {% endif %}\nB", nil, "A\nB"},
	}
	for _, tt := range tests {
		if got := renderSrc(t, tt.src, tt.vars); got != tt.want {
			t.Errorf("%s = %q, want %q", tt.src, got, tt.want)
		}
	}
}

// TestPyFloat compares pyFloat with values Python's repr prints.
func TestPyFloat(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -2.5: "-2.5", 0.1: "0.1", 1e15: "1000000000000000.0", 1e16: "1e+16",
		1.5e300: "1.5e+300", 0.0001: "0.0001", 0.00001: "1e-05", 123456789.125: "123456789.125",
	} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

// TestStrftime compares strftime with Go's own layout formatting, an
// independent implementation, on dates that exercise padding and AM/PM.
func TestStrftime(t *testing.T) {
	times := []time.Time{
		time.Date(2024, time.July, 26, 0, 5, 9, 0, time.UTC),
		time.Date(1999, time.December, 3, 12, 0, 0, 0, time.UTC),
		time.Date(2031, time.February, 28, 23, 59, 59, 0, time.FixedZone("X", -3*3600)),
	}
	pairs := []struct{ format, layout string }{
		{"%d %b %Y", "02 Jan 2006"},
		{"%A, %B %e, %y", "Monday, January _2, 06"},
		{"%a %H:%M:%S %p %I", "Mon 15:04:05 PM 03"},
		{"%m/%d %z %Z %%", "01/02 -0700 MST %"},
		{"%F %T", "2006-01-02 15:04:05"},
	}
	for _, tm := range times {
		for _, p := range pairs {
			if got, want := strftime(p.format, tm), tm.Format(p.layout); got != want {
				t.Errorf("strftime(%q, %v) = %q, want %q", p.format, tm, got, want)
			}
		}
		if got, want := strftime("%j", tm), tm.Format("002"); got != want {
			t.Errorf("%%j = %q, want %q", got, want)
		}
	}
	if got := strftime("%Q%", time.Time{}); got != "%Q%" {
		t.Errorf("unknown directives = %q, want them kept", got)
	}
}
