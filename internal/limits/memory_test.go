package limits

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// fakeSystem writes files under a temporary root (proc/..., sys/fs/cgroup/...)
// and makes the memory bounds read them; rlimit is the RLIMIT_AS to report
// (0: none).
func fakeSystem(t *testing.T, rlimit int64, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oldRoot, oldRlimit := memoryRoot, rlimitAS
	memoryRoot = os.DirFS(root)
	rlimitAS = func() (int64, bool) { return rlimit, rlimit > 0 }
	t.Cleanup(func() { memoryRoot, rlimitAS = oldRoot, oldRlimit })
}

const gib = int64(1) << 30

func meminfo(availGiB int64) string {
	return "MemTotal:       99999999 kB\nMemFree:  1 kB\nMemAvailable:   " + formatInt(availGiB<<20) + " kB\n"
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// TestMemoryBoundsReadEverySource: physical memory, a cgroup v2 limit (the
// tightest along the ancestors, usage subtracted), a cgroup v1 limit and
// RLIMIT_AS less the address space in use are each read, and the tightest
// comes first.
func TestMemoryBoundsReadEverySource(t *testing.T) {
	for _, c := range []struct {
		name   string
		rlimit int64
		files  map[string]string
		want   MemoryBound
	}{
		{"physical only", 0, map[string]string{"proc/meminfo": meminfo(19)}, MemoryBound{"MemAvailable", 19 * gib}},
		{"cgroup v2", 0, map[string]string{"proc/meminfo": meminfo(19), "proc/self/cgroup": "0::/user.slice/job\n",
			"sys/fs/cgroup/user.slice/job/memory.max": "max\n", "sys/fs/cgroup/user.slice/memory.max": formatInt(6*gib) + "\n",
			"sys/fs/cgroup/user.slice/memory.current": formatInt(2*gib) + "\n"},
			MemoryBound{"cgroup memory.max", 4 * gib}},
		{"cgroup v2 in a container", 0, map[string]string{"proc/meminfo": meminfo(19), "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": formatInt(3*gib) + "\n", "sys/fs/cgroup/memory.current": formatInt(gib) + "\n"},
			MemoryBound{"cgroup memory.max", 2 * gib}},
		{"cgroup v1", 0, map[string]string{"proc/meminfo": meminfo(19), "proc/self/cgroup": "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": formatInt(5*gib) + "\n",
			"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": formatInt(gib) + "\n"},
			MemoryBound{"cgroup memory.limit_in_bytes", 4 * gib}},
		{"cgroup v1 unlimited", 0, map[string]string{"proc/meminfo": meminfo(19), "proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"},
			MemoryBound{"MemAvailable", 19 * gib}},
		{"rlimit", 3 * gib, map[string]string{"proc/meminfo": meminfo(19), "proc/self/status": "Name: x\nVmSize:  1048576 kB\n"},
			MemoryBound{"RLIMIT_AS (ulimit -v)", 2 * gib}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fakeSystem(t, c.rlimit, c.files)
			b := MemoryBounds()
			if len(b) == 0 || b[0] != c.want {
				t.Errorf("got %v, want %v first", b, c.want)
			}
		})
	}
}

// TestReserveIsOneBudgetForTheProcess: sessions that each fit in the free
// memory but not all together are refused once their total exceeds it
// (the 16 sessions of 2.4 GiB on 19 GiB), the error says what the others
// hold; releasing one makes room; $AOTLM_MAX_MEMORY caps the total; a
// cgroup or rlimit tighter than physical memory is the budget.
func TestReserveIsOneBudgetForTheProcess(t *testing.T) {
	fakeSystem(t, 0, map[string]string{"proc/meminfo": meminfo(19)})
	session := 2*gib + 400<<20
	var held []*Reservation
	defer func() {
		for _, r := range held {
			r.Release()
		}
	}()
	var err error
	for range 16 {
		var r *Reservation
		if r, err = Reserve("a session of 40960 positions", session); err != nil {
			break
		}
		held = append(held, r)
	}
	var ae *AllocError
	if len(held) != 7 || !errors.As(err, &ae) || ae.Holders != 7 || !strings.Contains(err.Error(), "held by 7 sessions") ||
		!strings.Contains(err.Error(), "MemAvailable") {
		t.Fatalf("%d sessions of 2.4 GiB on 19 GiB: %v", len(held), err)
	}
	if n, c := Reserved(); n != 7*session || c != 7 {
		t.Errorf("Reserved = %d, %d", n, c)
	}
	held[0].Release()
	held[0].Release() // a second release changes nothing
	if r, err := Reserve("a session", session); err != nil {
		t.Errorf("after a release: %v", err)
	} else {
		held[0] = r
	}
	for _, r := range held {
		r.Release()
	}
	held = nil
	if n, c := Reserved(); n != 0 || c != 0 {
		t.Errorf("all released: Reserved = %d, %d", n, c)
	}

	t.Setenv(MemoryEnv, "3G")
	r1, err := Reserve("one", 2*gib)
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, r1)
	if _, err := Reserve("two", 2*gib); err == nil || !strings.Contains(err.Error(), MemoryEnv) {
		t.Errorf("over $%s in total: %v", MemoryEnv, err)
	}
	if err := CheckAlloc("a check", 2*gib); err == nil {
		t.Errorf("CheckAlloc ignores what the process holds under $%s", MemoryEnv)
	}
	r1.Release()
	held = nil
	t.Setenv(MemoryEnv, "")

	fakeSystem(t, 0, map[string]string{"proc/meminfo": meminfo(19), "proc/self/cgroup": "0::/\n",
		"sys/fs/cgroup/memory.max": formatInt(4*gib) + "\n", "sys/fs/cgroup/memory.current": "0\n"})
	if _, err := Reserve("a session", 5*gib); err == nil || !strings.Contains(err.Error(), "cgroup memory.max") {
		t.Errorf("over the cgroup: %v", err)
	}
	fakeSystem(t, 2*gib, map[string]string{"proc/meminfo": meminfo(19), "proc/self/status": "VmSize: 0 kB\n"})
	if err := CheckAlloc("a cache", 3*gib); err == nil || !strings.Contains(err.Error(), "RLIMIT_AS") {
		t.Errorf("over RLIMIT_AS: %v", err)
	}
	if _, err := Reserve("negative", -1); err == nil {
		t.Error("a negative request was reserved")
	}
}

// FuzzCgroupMemory: any /proc/self/cgroup and cgroup files parse without
// panic, and a limit found is a byte count the files hold.
func FuzzCgroupMemory(f *testing.F) {
	f.Add("0::/user.slice/x\n", "4294967296\n", "1024\n")
	f.Add("4:memory:/docker/abc\n0::/\n", "max\n", "\n")
	f.Add("12:memory,cpu:/../../..\n", "9223372036854771712", "-5")
	f.Add("::::\n0::\n", "1e9", "x")
	f.Fuzz(func(t *testing.T, cgroup, limit, usage string) {
		fsys := fstest.MapFS{"proc/self/cgroup": {Data: []byte(cgroup)}}
		for _, dir := range []string{"sys/fs/cgroup", "sys/fs/cgroup/memory"} {
			fsys[dir+"/memory.max"] = &fstest.MapFile{Data: []byte(limit)}
			fsys[dir+"/memory.current"] = &fstest.MapFile{Data: []byte(usage)}
			fsys[dir+"/memory.limit_in_bytes"] = &fstest.MapFile{Data: []byte(limit)}
			fsys[dir+"/memory.usage_in_bytes"] = &fstest.MapFile{Data: []byte(usage)}
		}
		l, u, name, ok := cgroupMemory(fsys)
		if !ok {
			return
		}
		if l < 0 || l >= noLimit || u < 0 || name == "" {
			t.Fatalf("limit %d usage %d name %q", l, u, name)
		}
		if want, err := strconv.ParseInt(strings.TrimSpace(limit), 10, 64); err != nil || want != l {
			t.Fatalf("limit %d from %q", l, limit)
		}
	})
}
