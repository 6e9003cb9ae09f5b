package limits

import (
	"runtime"
	"testing"
	"time"
)

const statBefore = `cpu  300 0 100 1000 0 0 0 0 0 0
cpu0 100 0 50 500 0 0 0 0 0 0
cpu1 200 0 50 500 0 0 0 0 0 0
cpu2 0 0 0 1000 0 0 0 0 0 0
intr 1 2 3
`

// cpu0 busy 90 of 100 ticks, cpu1 idle, cpu2 half busy
const statAfter = `cpu  400 0 100 1200 0 0 0 0 0 0
cpu0 170 0 70 510 0 0 0 0 0 0
cpu1 200 0 50 600 0 0 0 0 0 0
cpu2 25 0 25 1050 0 0 0 0 0 0
intr 1 2 3
`

// TestOthersBusy: the CPUs' busy ticks of /proc/stat, less this
// process's, in whole CPUs, over the CPUs allowed.
func TestOthersBusy(t *testing.T) {
	all := func(int) bool { return true }
	b, _ := parseStat([]byte(statBefore), all)
	a, _ := parseStat([]byte(statAfter), all)
	if a.n != 3 || a.total != 170+70+510+200+50+600+25+25+1050 || a.idle != 510+600+1050 {
		t.Fatalf("parsed %+v", a)
	}
	// 140 busy ticks over 100 a CPU: 1.4 CPUs, 1 once rounded
	if got := othersBusy(b, a, 0, 0); got != 1 {
		t.Errorf("others busy %d CPUs, want 1", got)
	}
	// this process took 60 of them: 0.8, still 1
	if got := othersBusy(b, a, 10, 70); got != 1 {
		t.Errorf("with 60 ticks of this process: %d CPUs, want 1", got)
	}
	// 100 of them: 0.4 CPU, 0
	if got := othersBusy(b, a, 0, 100); got != 0 {
		t.Errorf("with 100 ticks of this process: %d CPUs, want 0", got)
	}
	// allowed only cpu0: 90 of 100
	only0 := func(c int) bool { return c == 0 }
	b0, _ := parseStat([]byte(statBefore), only0)
	a0, _ := parseStat([]byte(statAfter), only0)
	if a0.n != 1 || othersBusy(b0, a0, 0, 0) != 1 {
		t.Errorf("cpu0 alone: %+v, %d busy", a0, othersBusy(b0, a0, 0, 0))
	}
	if _, ok := parseStat([]byte("intr 1 2\n"), nil); ok {
		t.Error("a /proc/stat without CPU lines read as some")
	}
}

// TestParseSelfStat: utime and stime come after the command, which may
// hold spaces and parentheses.
func TestParseSelfStat(t *testing.T) {
	line := "1234 (a (b) c) R 1 2 3 4 5 6 7 8 9 10 111 222 0 0 20 0 3 0 99"
	if got, ok := parseSelfStat([]byte(line)); !ok || got != 333 {
		t.Errorf("parseSelfStat = %d, %v; want 333", got, ok)
	}
	if _, ok := parseSelfStat([]byte("1234 (x) R 1")); ok {
		t.Error("a short line read")
	}
}

// TestBusyCPUs: on Linux the count is within the CPUs this process may
// run on, and those are at least one.
func TestBusyCPUs(t *testing.T) {
	busy, allowed := BusyCPUs(50 * time.Millisecond)
	if runtime.GOOS == "linux" && allowed < 1 {
		t.Fatalf("BusyCPUs: %d CPUs allowed on Linux", allowed)
	}
	if busy < 0 || busy > allowed {
		t.Errorf("BusyCPUs = %d of %d", busy, allowed)
	}
}
