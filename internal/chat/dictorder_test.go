package chat

import "testing"

// TestDictMethodsKeepOrder: items(), keys() and values() of a mapping
// decoded from JSON keep its keys' order, as Python's dicts do (gonja's
// own methods sort them), in loops, filtered loops and macros.
func TestDictMethodsKeepOrder(t *testing.T) {
	d, err := decodeOrdered(`{"b": 1, "a": {"z": 1, "c": 2}}`)
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		`{% for k, v in d.items() %}{{k}}{% endfor %}`:                                                     "ba",
		`{% for k, v in d|items %}{{k}}{% endfor %}`:                                                       "ba",
		`{% for k, v in d.a.items() %}{{k}}={{v}};{% endfor %}`:                                            "z=1;c=2;",
		`{{ d.a.keys()|join(",") }} {{ d.a.values()|join(",") }}`:                                          "z,c 1,2",
		`{% for k, v in d.items() if k != "b" %}{{k}}{% endfor %}`:                                         "a",
		`{% macro m(p) %}{% for k, v in p.items() %}{{k}}{% endfor %}{% endmacro %}{{ m(d.a) }}`:           "zc",
		`{{ d.get("b") }} {{ d.get("q", 7) }} {{ {"y": 1, "x": 2}.keys()|list|length }}`:                   "1 7 2",
		`{% set e = {"q": 1} %}{{ e.items()|list|length }}{% for k in {"m": 1}.keys() %}{{k}}{% endfor %}`: "1m",
	} {
		tpl, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tpl.Render(nil, Options{Vars: map[string]any{"d": d}})
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", src, got, err, want)
		}
	}
}
