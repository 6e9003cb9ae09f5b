package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CLI holds flags and output only: the pipeline lives in packages a
// program can use. These bounds keep library logic from growing back here.
const (
	maxCLILines           = 2700
	maxCLIInternalImports = 10
)

func TestCLIStaysThin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	imports := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if i := strings.Index(line, `"github.com/aotlm/aotlm/internal/`); i >= 0 {
				imports[strings.Trim(line[i:], `"`)] = true
			}
		}
	}
	if lines > maxCLILines {
		t.Errorf("cmd/aotlm holds %d lines of non-test code, over %d: move logic into a package", lines, maxCLILines)
	}
	if len(imports) > maxCLIInternalImports {
		t.Errorf("cmd/aotlm imports %d internal packages, over %d: %v", len(imports), maxCLIInternalImports, imports)
	}
	t.Logf("cmd/aotlm: %d lines, %d internal imports", lines, len(imports))
}
