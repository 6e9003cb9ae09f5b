package limits

import (
	"bufio"
	"bytes"
	"math"
	"strconv"
	"strings"
)

// cpuTimes is what /proc/stat tells of some CPUs: how many, and the ticks
// they spent in all and idle (idle and waiting for I/O).
type cpuTimes struct {
	n           int
	total, idle uint64
}

// parseStat reads the per-CPU lines ("cpu0 ...") of /proc/stat for the
// CPUs allowed (nil: all).
func parseStat(data []byte, allowed func(cpu int) bool) (cpuTimes, bool) {
	var t cpuTimes
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || (allowed != nil && !allowed(cpu)) {
			continue
		}
		// user nice system idle iowait irq softirq steal (guest time is
		// within user already)
		for i := 1; i < len(f) && i <= 8; i++ {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return cpuTimes{}, false
			}
			t.total += v
			if i == 4 || i == 5 {
				t.idle += v
			}
		}
		t.n++
	}
	return t, t.n > 0
}

// parseSelfStat reads this process's user and system ticks from
// /proc/self/stat (fields 14 and 15, after the command in parentheses).
func parseSelfStat(data []byte) (uint64, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 { // state is field 3; utime is field 14
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	return u + s, err1 == nil && err2 == nil
}

// othersBusy is how many CPUs' worth of time other processes took
// between two readings, rounded to the nearest: the CPUs' busy ticks less
// this process's, over the interval's ticks a CPU.
func othersBusy(before, after cpuTimes, selfBefore, selfAfter uint64) int {
	if after.total <= before.total || after.n <= 0 {
		return 0
	}
	span := float64(after.total-before.total) / float64(after.n)
	busy := float64((after.total - before.total) - (after.idle - before.idle))
	busy -= float64(selfAfter - selfBefore)
	return int(math.Round(max(busy, 0) / span))
}
