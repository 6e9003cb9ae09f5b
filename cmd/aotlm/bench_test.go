package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/kernel"
)

type benchJSON struct {
	Model   string  `json:"model"`
	LoadMs  float64 `json:"load_ms"`
	TTFTMs  float64 `json:"ttft_ms"`
	RSSMB   float64 `json:"rss_mb"`
	Threads int     `json:"threads"`
	Walk    string  `json:"decode_walk"`
	Kernels string  `json:"kernels"`
	Tests   []struct {
		Name   string    `json:"name"`
		TokS   float64   `json:"tok_s"`
		Ms     float64   `json:"ms"`
		Stddev float64   `json:"stddev"`
		RSSMB  float64   `json:"rss_mb"`
		Sample []float64 `json:"samples_ms"`
	} `json:"tests"`
}

// TestBench measures a compiled stories260K in both modes: one JSON object
// with one entry per test, in order, each with a positive rate and as many
// samples as repetitions.
func TestBench(t *testing.T) {
	path := compileStories(t)
	for _, mode := range []string{"hybrid", "kv"} {
		code, stdout, stderr := aotlmPlus(t, "bench", "-m", path, "-p", "8,32", "-n", "16",
			"--pg", "32,16", "-r", "2", "-t", "2", "--mode", mode, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", mode, code, stderr)
		}
		var rep benchJSON
		dec := json.NewDecoder(strings.NewReader(stdout))
		if err := dec.Decode(&rep); err != nil || dec.More() {
			t.Fatalf("%s: not one JSON object (%v): %s", mode, err, stdout)
		}
		var names []string
		for _, r := range rep.Tests {
			names = append(names, r.Name)
			if r.TokS <= 0 || r.Ms <= 0 || r.Stddev < 0 || len(r.Sample) != 2 {
				t.Errorf("%s %s: %+v", mode, r.Name, r)
			}
		}
		if got := strings.Join(names, " "); got != "pp8 pp32 tg16 pg32,16" {
			t.Errorf("%s: tests %q", mode, got)
		}
		if rep.Model != "stories.aot" || rep.Threads != 2 || rep.LoadMs <= 0 || rep.TTFTMs <= 0 {
			t.Errorf("%s: report %+v", mode, rep)
		}
		// The kernels were tuned before the load (kernel.TuneOnce).
		if rep.Walk == "" || rep.Walk != kernel.DecodeWalk() {
			t.Errorf("%s: decode walk %q, kernels use %q", mode, rep.Walk, kernel.DecodeWalk())
		}
		if rep.Kernels == "" || rep.Kernels != kernel.Active() {
			t.Errorf("%s: kernels %q, in use %q", mode, rep.Kernels, kernel.Active())
		}
		t.Logf("%s: %s", mode, stdout)
	}
	code, stdout, stderr := aotlmPlus(t, "bench", "-m", path, "-p", "16", "-n", "8", "-r", "1", "--hugepages")
	if code != 0 {
		t.Fatalf("table: exit %d: %s", code, stderr)
	}
	t.Logf("table:\n%s", stdout)
	wants := []string{"| model", "pp16", "tg8", "±", "load", "time to first token (pp16)", "peak RSS", "in huge pages"}
	if runtime.GOOS == "linux" {
		wants = append(wants, "(weights put in huge pages)")
	}
	for _, want := range wants {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

// TestBenchBadInput checks that each bad request exits 1 with one error
// line naming the problem; a prompt longer than the compiled context of 64
// names the context.
func TestBenchBadInput(t *testing.T) {
	path := compileStories(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-m", path, "-p", "128", "-n", "0"}, "context is 64"},
		{[]string{"bench", "-m", path, "-p", "0", "-n", "64"}, "context is 64"},
		{[]string{"bench", "-m", path, "-p", "0", "-n", "0", "--pg", "60,8"}, "context is 64"},
		{[]string{"bench", "-m", path, "--pg", "60"}, "PROMPT,GEN"},
		{[]string{"bench", "-m", path, "--mode", "lookahead"}, "mode"},
		{[]string{"bench", "-m", path, "-p", "0", "-n", "0"}, "no tests"},
		{[]string{"bench", "-m", path, "--floor", "--verify-rows", "4"}, "--floor measures the plain decode tests"},
		{[]string{"bench", "-m", path + ".missing"}, "no such file"},
		{[]string{"bench", "-m", path, "-p", "8", "-n", "0", "--cpuprofile", filepath.Join(t.TempDir(), "no", "cpu.prof")}, "cpu profile"},
	} {
		code, stdout, stderr := aotlmPlus(t, c.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || len(lines) != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 1 and one line with %q", c.args, code, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: wrote %q to stdout", c.args, stdout)
		}
	}
}

// TestBenchCPUProfile: --cpuprofile writes a gzip-compressed profile (the
// format go tool pprof reads) of the run.
// A strategy's bench (--mode) is profiled too.
func TestBenchCPUProfile(t *testing.T) {
	path := compileStories(t)
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.txt")
	if err := os.WriteFile(prompts, []byte("Once upon a time\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, args := range [][]string{
		{"-p", "32", "-n", "16", "-r", "2"},
		{"--mode", "lookup", "--prompts", prompts, "-n", "16", "-r", "1"},
	} {
		prof := filepath.Join(dir, fmt.Sprintf("cpu%d.prof", i))
		code, _, stderr := aotlmPlus(t, append([]string{"bench", "-m", path, "--cpuprofile", prof}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		checkProfile(t, prof)
	}
}

// checkProfile fails t unless prof holds a gzip-compressed profile.
func checkProfile(t *testing.T, prof string) {
	t.Helper()
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("profile is not gzip data: %v", err)
	}
	body, err := io.ReadAll(zr)
	if err != nil || len(body) == 0 {
		t.Fatalf("profile body: %d bytes, %v", len(body), err)
	}
}

// TestBenchFloor: --floor gives each decoding test the floor measured
// beside it (the weights a token streams, at most the file, over the read
// bandwidth) and the share of it the decode reached; a prefill test has
// none. Where the build can evict the weights from the caches
// (kernel.FlushCaches) it gives the floor from memory as well. The table
// prints both after the load line.
func TestBenchFloor(t *testing.T) {
	evicts := kernel.FlushCaches(nil)
	path := compileStories(t)
	code, stdout, stderr := aotlmPlus(t, "bench", "-m", path, "-p", "8", "-n", "16", "--pg", "8,8", "-r", "2", "-t", "2", "--floor", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Size   int64 `json:"size_bytes"`
		Decode int64 `json:"decode_weight_bytes"`
		Tests  []struct {
			Name      string  `json:"name"`
			FloorGBps float64 `json:"floor_gbps"`
			FloorTokS float64 `json:"floor_tok_s"`
			OfFloor   float64 `json:"of_floor"`
			MemGBps   float64 `json:"memory_gbps"`
			MemTokS   float64 `json:"memory_tok_s"`
			OfMemory  float64 `json:"of_memory"`
		} `json:"tests"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if rep.Decode <= 0 || rep.Decode > rep.Size || len(rep.Tests) != 3 {
		t.Fatalf("decode weights %d bytes of a %d-byte file, %d tests", rep.Decode, rep.Size, len(rep.Tests))
	}
	for _, r := range rep.Tests {
		decodes := r.Name != "pp8"
		if has := r.FloorGBps > 0 && r.FloorTokS > 0 && r.OfFloor > 0; has != decodes {
			t.Errorf("%s: floor %v GB/s, %v tok/s, share %v", r.Name, r.FloorGBps, r.FloorTokS, r.OfFloor)
		}
		if decodes && r.FloorTokS*float64(rep.Decode) > 1.001*r.FloorGBps*1e9 {
			t.Errorf("%s: floor %v tok/s is more than %v GB/s over %d bytes", r.Name, r.FloorTokS, r.FloorGBps, rep.Decode)
		}
		if has := r.MemGBps > 0 && r.MemTokS > 0 && r.OfMemory > 0; has != (decodes && evicts) {
			t.Errorf("%s: floor from memory %v GB/s, %v tok/s, share %v (the build evicts: %v)", r.Name, r.MemGBps, r.MemTokS, r.OfMemory, evicts)
		}
		if decodes && r.MemTokS*float64(rep.Decode) > 1.001*r.MemGBps*1e9 {
			t.Errorf("%s: floor from memory %v tok/s is more than %v GB/s over %d bytes", r.Name, r.MemTokS, r.MemGBps, rep.Decode)
		}
	}
	code, stdout, stderr = aotlmPlus(t, "bench", "-m", path, "-p", "0", "-n", "8", "-r", "1", "-t", "1", "--floor")
	if code != 0 || !strings.Contains(stdout, "decode floor (tg8): ") || !strings.Contains(stdout, "with 1 thread: ") || !strings.Contains(stdout, "% of it") {
		t.Errorf("table: exit %d, stderr %s:\n%s", code, stderr, stdout)
	}
	if got := strings.Contains(stdout, "from memory (evicted from the caches first): "); got != evicts {
		t.Errorf("table: the floor from memory printed %v, the build evicts %v:\n%s", got, evicts, stdout)
	}
}
