package limits

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// BusyCPUs is how many of the CPUs this process may run on other
// processes kept busy over d (read from /proc/stat, less this process's
// own time, rounded to whole CPUs), and the CPUs it may run on; 0 and 0
// where the system does not tell (some Android versions refuse
// /proc/stat to apps).
func BusyCPUs(d time.Duration) (busy, allowed int) {
	mask := affinity()
	read := func() (cpuTimes, uint64, bool) {
		st, err := os.ReadFile("/proc/stat")
		if err != nil {
			return cpuTimes{}, 0, false
		}
		self, err := os.ReadFile("/proc/self/stat")
		if err != nil {
			return cpuTimes{}, 0, false
		}
		t, ok := parseStat(st, mask)
		s, ok2 := parseSelfStat(self)
		return t, s, ok && ok2
	}
	t0, s0, ok := read()
	if !ok {
		return 0, 0
	}
	time.Sleep(d)
	t1, s1, ok := read()
	if !ok {
		return 0, 0
	}
	return min(othersBusy(t0, t1, s0, s1), t1.n), t1.n
}

// affinity returns whether this process may run on a CPU (nil when the
// system does not say).
func affinity() func(cpu int) bool {
	var mask [64]uint64 // 4096 CPUs
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return nil
	}
	return func(cpu int) bool {
		return cpu >= 0 && cpu < 64*len(mask) && mask[cpu/64]&(1<<(cpu%64)) != 0
	}
}
