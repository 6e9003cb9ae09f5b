// Command benchdoc writes docs/benchmarks.md from the results files
// docs/results/machines.tsv and docs/results/benchmarks.tsv: the
// protocol of the side-by-side runs, then one table per machine. Run it
// from the repository root after adding or replacing result rows:
//
//	go run ./internal/bench/benchdoc
//
// A test fails when docs/benchmarks.md is not what the results render
// to, so the page and its data cannot drift apart.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	results := flag.String("results", "docs/results", "folder of machines.tsv and benchmarks.tsv")
	out := flag.String("o", "docs/benchmarks.md", "the page to write")
	flag.Parse()
	if err := run(*results, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

// run renders the results in dir to the file out.
func run(dir, out string) error {
	res, err := loadResults(dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, render(res), 0o644); err != nil {
		return fmt.Errorf("write the page: %w", err)
	}
	return nil
}
