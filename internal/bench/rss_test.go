package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// status is the shape of /proc/<pid>/status as proc(5) documents it.
const status = "Name:\tbench.test\nVmPeak:\t  812345 kB\nVmSize:\t  800000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   18000 kB\n"

func TestParseVmHWM(t *testing.T) {
	if n, err := ParseVmHWM(strings.NewReader(status)); err != nil || n != 20480*1024 {
		t.Errorf("got %d, %v; want %d", n, err, 20480*1024)
	}
	for _, c := range []struct{ in, want string }{
		{"Name:\tx\n", "no VmHWM"},
		{"VmHWM:\t 12 MB\n", "kB"},
		{"VmHWM:\t\n", "kB"},
		{"VmHWM:\t -4 kB\n", "not a size"},
		{"VmHWM:\t 99999999999999999999 kB\n", "not a size"},
		{status[:len(status)/3], "no VmHWM"},
	} {
		if _, err := ParseVmHWM(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.in, err, c.want)
		}
	}
}

// TestPeakRSS reads this process's peak RSS: positive on Linux (where the
// heap below is resident), 0 where /proc does not exist.
func TestPeakRSS(t *testing.T) {
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	n := PeakRSS()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		if n != 0 {
			t.Errorf("no /proc, PeakRSS %d", n)
		}
		return
	}
	if runtime.GOOS == "linux" && n < int64(len(buf)) {
		t.Errorf("PeakRSS %d, below the %d bytes just touched", n, len(buf))
	}
	runtime.KeepAlive(buf)
}

func FuzzParseVmHWM(f *testing.F) {
	f.Add([]byte(status))
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("VmHWM:"))
	f.Add([]byte("VmHWM: 1 kB 2 kB\n"))
	f.Add([]byte("VmHWM:\t9223372036854775807 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseVmHWM(strings.NewReader(string(b)))
		if err == nil && (n < 0 || n%1024 != 0) {
			t.Errorf("%q: %d bytes", b, n)
		}
	})
}
