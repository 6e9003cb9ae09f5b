package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// ParsePairs reads pg tests written as "PROMPT,GEN" (llama-bench's -pg).
func ParsePairs(pgs []string) ([][2]int, error) {
	var pairs [][2]int
	for _, s := range pgs {
		a, b, ok := strings.Cut(s, ",")
		p, err1 := strconv.Atoi(strings.TrimSpace(a))
		n, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bench: -pg %q is not PROMPT,GEN (such as 512,128)", s)
		}
		pairs = append(pairs, [2]int{p, n})
	}
	return pairs, nil
}

// StartCPUProfile profiles the process's CPU into the file at path; the
// returned function stops it and closes the file.
func StartCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
