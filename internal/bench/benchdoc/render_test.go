package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoDocs is the docs folder of this checkout, seen from this package.
const repoDocs = "../../../docs"

// TestBenchmarksDocIsGenerated fails when docs/benchmarks.md is not what
// the results files render to: edit docs/results/*.tsv and run
// `go run ./internal/bench/benchdoc` instead of editing the page.
func TestBenchmarksDocIsGenerated(t *testing.T) {
	res, err := loadResults(filepath.Join(repoDocs, "results"))
	if err != nil {
		t.Fatal(err)
	}
	want := render(res)
	got, err := os.ReadFile(filepath.Join(repoDocs, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/benchmarks.md differs from what docs/results renders to (first difference at line %d); run `go run ./internal/bench/benchdoc` from the repository root", firstDiffLine(got, want))
	}
	if n := bytes.Count(want, []byte("\n")); n > 300 {
		t.Errorf("docs/benchmarks.md is %d lines; keep it a reference of at most 300 (older runs go to docs/lab)", n)
	}
}

// TestBenchDocCatchesDrift: a changed number in the results, or in the
// page, makes the two differ; a median that is not the median of its
// rounds, an unknown machine and a missing field are refused.
func TestBenchDocCatchesDrift(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"machines.tsv", "benchmarks.tsv"} {
		b, err := os.ReadFile(filepath.Join(repoDocs, "results", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := loadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	page := render(res)
	res.Rows[0]["aotlm_tok_s"] += "1"
	if bytes.Equal(page, render(res)) {
		t.Fatal("a changed rate rendered the same page")
	}

	tsv, err := os.ReadFile(filepath.Join(dir, "benchmarks.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(tsv), "\n")
	for _, c := range []struct {
		name string
		edit func(fields []string) []string
		want string
	}{
		{"median", func(f []string) []string { f[11] = "9.99x"; return f }, "not the median"},
		{"machine", func(f []string) []string { f[0] = "no-such-machine"; return f }, "not in machines.tsv"},
		{"fields", func(f []string) []string { return f[:10] }, "fields"},
		{"empty", func(f []string) []string { f[8] = ""; return f }, "empty aotlm_tok_s"},
	} {
		edited := append([]string(nil), lines...)
		edited[1] = strings.Join(c.edit(strings.Split(edited[1], "\t")), "\t")
		if err := os.WriteFile(filepath.Join(dir, "benchmarks.tsv"), []byte(strings.Join(edited, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadResults(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}

	// run writes exactly what render returns
	if err := os.WriteFile(filepath.Join(dir, "benchmarks.tsv"), tsv, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "benchmarks.md")
	if err := run(dir, out); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, page) {
		t.Error("run wrote a page other than render's")
	}
}

// firstDiffLine returns the first line (from 1) where a and b differ.
func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range la {
		if i >= len(lb) || la[i] != lb[i] {
			return i + 1
		}
	}
	return len(la) + 1
}

// TestRatioSpans: the summary gives each test's lowest and highest
// median ratio as written in the results.
func TestRatioSpans(t *testing.T) {
	rows := []record{
		{"test": "pp512", "median_ratio": "1.80x"},
		{"test": "tg128", "median_ratio": "0.95x"},
		{"test": "pp512", "median_ratio": "3.03x"},
		{"test": "pp512", "median_ratio": "2.10x"},
		{"test": "tg128", "median_ratio": "0.95x"},
	}
	if got, want := ratioSpans(rows), "pp512 1.80-3.03x, tg128 0.95x"; got != want {
		t.Errorf("ratioSpans = %q, want %q", got, want)
	}
}

// TestRowWithoutLlamaCpp: a row of a shape llama.cpp cannot run (its
// llama.cpp column "none") needs no llama.cpp rates or ratio, renders
// "cannot run" and no ratio, and stays out of the summary of ratios; such
// a row that carries a ratio is refused.
func TestRowWithoutLlamaCpp(t *testing.T) {
	dir := t.TempDir()
	machines := "machine\tname\tcpu\tllama.cpp\nm1\tMachine\tSome CPU\tcommit abc\n"
	row := func(rest string) string {
		return strings.Join(resultColumns, "\t") + "\n" +
			"m1\t2026-12-07\tabc1234\tqwen3-0.6b\tlpbq\tq4_0\t1\ttg128\t10 11 12\t5 5 6\t2.00 2.20 2.00\t2.00x\t\t\t\t\t\t\n" +
			"m1\t2026-12-07\tabc1234\tcodegen2-1b\tlpbq\tnone\t1\ttg128\t20 21 22\t" + rest + "\n"
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("machines.tsv", machines)
	write("benchmarks.tsv", row("\t\t\t\t\t\t\t\t"))
	res, err := loadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	page := string(render(res))
	if !strings.Contains(page, "| codegen2-1b | lpbq / none | 1 | tg128 | 20 21 22 | cannot run | - | - |") {
		t.Errorf("the aotlm-only row is not rendered as one without llama.cpp:\n%s", page)
	}
	if !strings.Contains(page, "Median ratios: tg128 2.00x.") {
		t.Errorf("the summary counts the aotlm-only row:\n%s", page)
	}
	write("benchmarks.tsv", row("\t1.5\t\t1.50x\t\t\t\t\t"))
	if _, err := loadResults(dir); err == nil || !strings.Contains(err.Error(), "cannot run") {
		t.Errorf("a ratio in a row without llama.cpp: error %v, want a refusal", err)
	}
}
