package limits

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The memory a process may take is the least of four bounds, each read
// when a request is checked:
//
//   - MemAvailable of /proc/meminfo, the physical memory free for new
//     allocations;
//   - the limit of the process's memory cgroup less its usage (cgroup v2
//     memory.max and memory.current, v1 memory.limit_in_bytes and
//     memory.usage_in_bytes, the tightest along the cgroup's ancestors);
//   - RLIMIT_AS (ulimit -v) less the process's address space (VmSize);
//   - $AOTLM_MAX_MEMORY.
//
// Reserve accounts for what the process's sessions hold: every live
// reservation counts against the memory that was free when the first of
// them was made, so sixteen sessions of 2.4 GiB are not each checked
// against the same 19 GiB (their pages are touched only as they fill).

// MemoryBound is one bound on the memory the process may still take.
type MemoryBound struct {
	Name  string // e.g. "MemAvailable", "cgroup memory.max", "RLIMIT_AS (ulimit -v)"
	Bytes int64
}

// memoryRoot is the file system the bounds are read from; tests replace
// it with a folder holding proc/ and sys/fs/cgroup/.
var memoryRoot fs.FS = os.DirFS("/")

// rlimitAS returns the process's address-space limit; false when there is
// none. Tests replace it.
var rlimitAS = addressSpaceLimit

// MemoryBounds reads the bounds the system reports now, the tightest
// first; $AOTLM_MAX_MEMORY is left to the callers, which apply it to the
// process's total. An empty list means the system says nothing.
func MemoryBounds() []MemoryBound {
	var out []MemoryBound
	if f, err := memoryRoot.Open("proc/meminfo"); err == nil {
		if n, ok := parseMemAvailable(f); ok {
			out = append(out, MemoryBound{"MemAvailable", n})
		}
		f.Close()
	}
	if limit, usage, name, ok := cgroupMemory(memoryRoot); ok {
		out = append(out, MemoryBound{name, max(limit-usage, 0)})
	}
	if limit, ok := rlimitAS(); ok {
		used, _ := procStatusBytes(memoryRoot, "VmSize:")
		out = append(out, MemoryBound{"RLIMIT_AS (ulimit -v)", max(limit-used, 0)})
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Bytes < out[j-1].Bytes; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// memoryEnvCap reads $AOTLM_MAX_MEMORY; false when it is unset.
func memoryEnvCap() (int64, bool, error) {
	v := os.Getenv(MemoryEnv)
	if v == "" {
		return 0, false, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return 0, false, fmt.Errorf("$%s: %w", MemoryEnv, err)
	}
	return n, true, nil
}

// tightest returns the least of bounds, or an unaddressable 128 TiB when
// there is none.
func tightest(bounds []MemoryBound) MemoryBound {
	if len(bounds) == 0 {
		return MemoryBound{"the address space", 1 << 47}
	}
	return bounds[0]
}

// noLimit is where a cgroup v1 limit means "none" (the kernel reports
// about 2^63 rounded down to a page).
const noLimit = 1 << 60

// cgroupMemory reads the memory limit and usage of the process's cgroup:
// v2 (a "0::/path" line in /proc/self/cgroup) or v1 (the memory
// controller's line). The limit is the tightest of the cgroup and its
// ancestors; false when no limit is set or the files are absent.
func cgroupMemory(root fs.FS) (limit, usage int64, name string, ok bool) {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return 0, 0, "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		dir, limitFile, usageFile := "", "", ""
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, limitFile, usageFile = "sys/fs/cgroup", "memory.max", "memory.current"
		case hasController(parts[1], "memory"):
			dir, limitFile, usageFile = "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		if l, u, found := cgroupWalk(root, dir, parts[2], limitFile, usageFile); found {
			return l, u, "cgroup " + limitFile, true
		}
	}
	return 0, 0, "", false
}

func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// cgroupWalk reads limitFile from the cgroup's folder and each ancestor
// up to the mount point (in a container the process's own cgroup is the
// mount point itself) and returns the tightest limit with the usage beside
// it.
func cgroupWalk(root fs.FS, mount, cg, limitFile, usageFile string) (limit, usage int64, found bool) {
	cg = path.Clean("/" + cg)
	for {
		d := path.Join(mount, cg)
		if l, ok := readCgroupNumber(root, path.Join(d, limitFile)); ok && l < noLimit && (!found || l < limit) {
			u, _ := readCgroupNumber(root, path.Join(d, usageFile))
			limit, usage, found = l, u, true
		}
		if cg == "/" {
			return limit, usage, found
		}
		cg = path.Dir(cg)
	}
}

// readCgroupNumber reads a cgroup file holding a byte count ("max" is
// none).
func readCgroupNumber(root fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// procStatusBytes reads a "Key:  N kB" line of /proc/self/status.
func procStatusBytes(root fs.FS, key string) (int64, bool) {
	f, err := root.Open("proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseKBLine(f, key)
}

// parseKBLine finds the line starting with key and reads its "N kB".
func parseKBLine(r io.Reader, key string) (int64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// accountant is the process's one memory budget (see Reserve).
var accountant struct {
	mu       sync.Mutex
	reserved int64       // bytes held by live reservations
	count    int         // live reservations
	base     MemoryBound // the tightest bound when the first live one was made
}

// Reservation is memory the accountant counts as held until Release.
type Reservation struct {
	bytes    int64
	released atomic.Bool
}

// Release returns the reservation's memory to the budget; later calls do
// nothing. A nil Reservation may be released.
func (r *Reservation) Release() {
	if r == nil || !r.released.CompareAndSwap(false, true) {
		return
	}
	accountant.mu.Lock()
	accountant.reserved -= r.bytes
	accountant.count--
	accountant.mu.Unlock()
}

// Reserve counts bytes for what against the process's memory budget, or
// refuses them with an *AllocError. Every live reservation of the process
// (the sessions of every model it opened) counts: their total may not
// exceed the memory that was free when the first of them was made, nor
// $AOTLM_MAX_MEMORY; and the request alone may not exceed what is free
// now. Release the reservation when the memory is dropped.
func Reserve(what string, bytes int64) (*Reservation, error) {
	capBytes, capSet, err := memoryEnvCap()
	if err != nil {
		return nil, err
	}
	now := tightest(MemoryBounds())
	accountant.mu.Lock()
	defer accountant.mu.Unlock()
	if accountant.count == 0 {
		accountant.base = now
	}
	held, holders := accountant.reserved, accountant.count
	fail := func(b MemoryBound, held int64) error {
		return &AllocError{What: what, Bytes: bytes, Available: max(b.Bytes-held, 0), Bound: b.Name,
			Held: held, Holders: holders}
	}
	switch {
	case bytes < 0:
		return nil, fail(now, 0)
	case capSet && held+bytes > capBytes:
		return nil, fail(MemoryBound{"$" + MemoryEnv, capBytes}, held)
	case held+bytes > accountant.base.Bytes:
		return nil, fail(accountant.base, held)
	case bytes > now.Bytes:
		return nil, fail(now, 0)
	}
	accountant.reserved += bytes
	accountant.count++
	return &Reservation{bytes: bytes}, nil
}

// Reserved returns the bytes the process's live reservations hold and
// their number.
func Reserved() (bytes int64, count int) {
	accountant.mu.Lock()
	defer accountant.mu.Unlock()
	return accountant.reserved, accountant.count
}
