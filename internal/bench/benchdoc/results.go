package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// resultColumns are the columns of benchmarks.tsv, in order. Every
// record is one row of a side-by-side table: one model shape, weight
// type, thread count and test on one machine, with the rates of every
// round as measured (space-separated), each round's ratio and their
// median. The floor columns are empty for prefill tests and where the
// run did not measure them.
var resultColumns = []string{
	"machine", "date", "commit", "shape", "aotlm", "llama.cpp", "threads", "test",
	"aotlm_tok_s", "llama_cpp_tok_s", "ratios", "median_ratio",
	"probe_gbps", "aotlm_of_floor", "llama_cpp_of_floor",
	"memory_gbps", "aotlm_of_memory", "llama_cpp_of_memory",
}

// machineColumns are the columns of machines.tsv, in order.
var machineColumns = []string{"machine", "name", "cpu", "llama.cpp"}

// noLlamaCpp in the llama.cpp column marks a row of a family llama.cpp
// cannot run: aotlm's rates alone, its llama.cpp rates, ratios and median
// empty.
const noLlamaCpp = "none"

// record is one row of benchmarks.tsv, keyed by column name.
type record map[string]string

// machine is one row of machines.tsv.
type machine struct {
	ID, Name, CPU, LlamaCpp string
}

// results is the content of the results folder.
type results struct {
	Machines []machine
	Rows     []record
}

// readTSV reads a tab-separated file whose first line names the columns
// and checks that they are want. Blank lines and lines starting with #
// are skipped.
func readTSV(path string, want []string) ([]record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var rows []record
	header := true
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if header {
			if strings.Join(fields, "\t") != strings.Join(want, "\t") {
				return nil, fmt.Errorf("%s:%d: columns %q, want %q", path, i+1, fields, want)
			}
			header = false
			continue
		}
		if len(fields) != len(want) {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d", path, i+1, len(fields), len(want))
		}
		r := record{"line": strconv.Itoa(i + 1)}
		for j, c := range want {
			r[c] = strings.TrimSpace(fields[j])
		}
		rows = append(rows, r)
	}
	if header {
		return nil, fmt.Errorf("%s: no header line", path)
	}
	return rows, nil
}

// loadResults reads machines.tsv and benchmarks.tsv from dir and checks
// them: every row names a listed machine and has its rates, and its
// median ratio is the median of its rounds' ratios.
func loadResults(dir string) (*results, error) {
	ms, err := readTSV(filepath.Join(dir, "machines.tsv"), machineColumns)
	if err != nil {
		return nil, err
	}
	res := &results{}
	known := map[string]bool{}
	for _, m := range ms {
		if known[m["machine"]] {
			return nil, fmt.Errorf("machines.tsv:%s: machine %q listed twice", m["line"], m["machine"])
		}
		known[m["machine"]] = true
		res.Machines = append(res.Machines, machine{ID: m["machine"], Name: m["name"], CPU: m["cpu"], LlamaCpp: m["llama.cpp"]})
	}
	rows, err := readTSV(filepath.Join(dir, "benchmarks.tsv"), resultColumns)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		where := "benchmarks.tsv:" + r["line"]
		if !known[r["machine"]] {
			return nil, fmt.Errorf("%s: machine %q is not in machines.tsv", where, r["machine"])
		}
		need := []string{"date", "commit", "shape", "aotlm", "llama.cpp", "threads", "test", "aotlm_tok_s", "llama_cpp_tok_s", "median_ratio"}
		if r["llama.cpp"] == noLlamaCpp {
			// aotlm alone: nothing to compare with
			need = need[:8]
			for _, c := range []string{"llama_cpp_tok_s", "ratios", "median_ratio", "llama_cpp_of_floor", "llama_cpp_of_memory"} {
				if r[c] != "" {
					return nil, fmt.Errorf("%s: %s %q in a row whose llama.cpp is %q (llama.cpp cannot run the shape)", where, c, r[c], noLlamaCpp)
				}
			}
		}
		for _, c := range need {
			if r[c] == "" {
				return nil, fmt.Errorf("%s: empty %s", where, c)
			}
		}
		if err := checkMedian(r["ratios"], r["median_ratio"]); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	res.Rows = rows
	return res, nil
}

// checkMedian checks that median (as "1.23x") is the median of the
// space-separated ratios, when there are any.
func checkMedian(ratios, median string) error {
	if ratios == "" {
		return nil
	}
	var vs []float64
	for _, f := range strings.Fields(ratios) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return fmt.Errorf("ratio %q: %w", f, err)
		}
		vs = append(vs, v)
	}
	m, err := strconv.ParseFloat(strings.TrimSuffix(median, "x"), 64)
	if err != nil {
		return fmt.Errorf("median ratio %q: %w", median, err)
	}
	sort.Float64s(vs)
	want := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		want = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	if fmt.Sprintf("%.2f", want) != fmt.Sprintf("%.2f", m) {
		return fmt.Errorf("median ratio %s is not the median of the ratios %s", median, ratios)
	}
	return nil
}
