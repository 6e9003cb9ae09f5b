package serve

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// DefaultMaxMemory is the memory budget of a Multi when none is given:
// half of the machine's memory, within the process's limits (a cgroup's
// memory.max, the address-space limit of ulimit -v), or 4 GiB where none
// of them can be read.
func DefaultMaxMemory() int64 {
	budget := int64(0)
	if total := memTotal(); total > 0 {
		budget = total / 2
	}
	for _, limit := range []int64{cgroupLimit(), addressSpaceLimit()} {
		if limit > 0 && (budget == 0 || limit*3/4 < budget) {
			budget = limit * 3 / 4
		}
	}
	if budget <= 0 {
		budget = 4 << 30
	}
	return budget
}

// memTotal reads MemTotal of /proc/meminfo (0 when it cannot).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fs := strings.Fields(rest)
			if len(fs) >= 1 {
				kb, err := strconv.ParseInt(fs[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// cgroupLimit reads the memory limit of the process's cgroup (v2's
// memory.max, v1's memory.limit_in_bytes); 0 when there is none.
func cgroupLimit() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && v > 0 && v < 1<<60 {
			return v
		}
	}
	return 0
}
