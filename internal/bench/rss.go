package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns the peak resident set size of this process in bytes, the
// VmHWM line of /proc/self/status; 0 where that file does not exist (any
// system but Linux and Android) or cannot be parsed.
func PeakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	n, err := ParseVmHWM(f)
	if err != nil {
		return 0
	}
	return n
}

// ParseVmHWM reads a /proc/<pid>/status text and returns its VmHWM value
// ("VmHWM:  123456 kB") in bytes.
func ParseVmHWM(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("bench: VmHWM line %q is not \"<n> kB\"", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<53/1024 {
			return 0, fmt.Errorf("bench: VmHWM value %q is not a size in kB", f[0])
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("bench: reading status: %w", err)
	}
	return 0, fmt.Errorf("bench: no VmHWM line in status")
}
