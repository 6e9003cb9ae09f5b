package engine

import "time"

// bench is the pool's count of the threads it leaves out of its
// dispatches because other processes hold cores. A phone or laptop is
// never idle: when one of its cores is busy with another process, a
// worker on that core runs in turns with it, and a dispatch whose part
// it claimed waits for its turn to come back (milliseconds, against tens
// of microseconds for a one-token linear). The pool times its dispatches
// against what the caller alone would have taken (its own work scaled by
// the share of the grains it ran, see alone); over each benchWindow of
// dispatch time, when the threads did not beat that by benchWorth, one
// thread is left out (the dispatches run on one thread fewer, and the
// left-out worker parks, so the system moves the others off the busy
// core). After period a thread comes back to try; left out again at one
// of the first benchProbe windows after, period doubles up to benchMax,
// otherwise it starts again from benchBase. (Counted in windows, not in
// time: on a loaded machine one stall can last longer than a window.)
//
// Only the caller of a dispatch reads and writes it: the engine runs
// one pass at a time on its pool.
type bench struct {
	benched int           // threads left out of dispatches
	until   time.Time     // when one of them comes back
	period  time.Duration // how long a thread stays out
	back    time.Time     // when a thread last came back
	windows int           // windows judged since then
	took    time.Duration // the dispatches of the current window
	single  time.Duration // the caller alone over the same dispatches
	left    int           // times a thread was left out
	pending bool          // the pool's start sample is not taken yet (sampleStart)
}

const (
	// benchWindow is the dispatch time over which the threads are
	// judged: a fraction of a one-token pass, several of a system's
	// turns on a shared core.
	benchWindow = 8 * time.Millisecond
	// benchWorth: the threads stay while their dispatches take less than
	// this share of the caller's time alone. (The caller's rate while the
	// others stream weights too is below its rate alone, since a decode
	// shares the memory bandwidth, so its time alone is an upper bound;
	// on a machine where every core is shared, though, each thread left
	// out is a share of the CPUs lost, and a margin below 1 left threads
	// out that paid: 2 threads with and without the rule alternating in
	// one process, load average 25 on 2 vCPUs of an AMD EPYC, decoded
	// 0.76x with 0.85.)
	benchWorth = 1.0
	// benchBase and benchMax bound how long a thread stays out, and a
	// thread left out at one of the first benchProbe windows after a
	// thread's coming back stays out twice as long as the last.
	benchBase  = 25 * time.Millisecond
	benchMax   = time.Second
	benchProbe = 2
)

// alone is the time the caller would have taken for all chunks of a
// dispatch at the rate it ran its own ran chunks in own; a caller that
// ran none gives no rate, and counts as twice own.
func alone(own time.Duration, ran, chunks int) time.Duration {
	if ran <= 0 {
		return 2 * own
	}
	return time.Duration(float64(own) * float64(chunks) / float64(ran))
}

// start leaves n threads of a pool of threads (at most all but the
// caller) out from now, as a stall would, for benchBase.
func (b *bench) start(n, threads int, now time.Time) {
	b.benched = min(max(n, 0), max(threads-1, 0))
	b.period = benchBase
	b.until = now.Add(b.period)
}

// admit returns the threads a dispatch asking for threads runs on at
// now, bringing one benched thread back when its time is up.
func (b *bench) admit(threads int, now time.Time) int {
	if b.benched > 0 && !now.Before(b.until) {
		b.benched--
		b.back, b.windows = now, 0
		b.until = now.Add(b.period)
		b.took, b.single = 0, 0
	}
	return max(1, threads-b.benched)
}

// record adds a dispatch of a pool of threads that took took, and single
// for the caller alone, ending at now; at the end of a window it leaves
// a thread out when the threads were not worth it.
func (b *bench) record(took, single time.Duration, threads int, now time.Time) {
	b.took += took
	b.single += single
	if b.took < benchWindow {
		return
	}
	worth := float64(b.took) < benchWorth*float64(b.single)
	b.took, b.single = 0, 0
	b.windows++
	if b.windows == 1 && !b.back.IsZero() {
		return // the thread back was parked: its first window waits for it to wake
	}
	if worth || b.benched >= threads-1 {
		return
	}
	b.left++
	if !b.back.IsZero() && b.windows <= benchProbe {
		b.period = min(2*b.period, benchMax)
	} else {
		b.period = benchBase
	}
	b.benched++
	b.until = now.Add(b.period)
}
