package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// qwen3Shape is a random-weight Llama-family model with Qwen3-0.6B's
// dimensions: hidden 1024, 28 layers, 16 query and 8 key/value heads of
// 128, FFN 3072, vocabulary 151936, tied embeddings, stored in bf16 (as
// the released checkpoint is, which also halves the bytes written).
func qwen3Shape() tinymodel.Config {
	return tinymodel.Config{HiddenSize: 1024, IntermediateSize: 3072, NumLayers: 28, NumHeads: 16,
		NumKVHeads: 8, HeadDim: 128, VocabSize: 151936, MaxPositions: 40960, RMSNormEps: 1e-6,
		RopeTheta: 1e6, TieWordEmbeddings: true, DType: tensor.BF16}
}

// shapeSizes is the part of `inspect --json` the memory bound reads.
type shapeSizes struct {
	Sizes struct {
		File int64 `json:"file"`
		KV   struct {
			Bytes int64 `json:"bytes"`
		} `json:"kv"`
		Arenas []struct {
			ARLen int   `json:"ar_len"`
			Bytes int64 `json:"bytes"`
		} `json:"arenas"`
	} `json:"sizes"`
}

// BenchmarkQwen3ShapeLoad measures the load of a real-size artifact: the
// Qwen3-0.6B shape quantized at w4a16-lpbq and compiled with --ar-len 32
// --ctx 1024 --kv u8 (built once, in a temporary folder; it takes minutes
// and several GB of memory and disk).
//
// Each iteration opens the artifact with the engine, starts a session and
// decodes one token; the metrics are the mean open time (open-ms, the
// load time the targets name), session start (session-ms) and first decode
// (decode-ms). Then a fresh `aotlm bench -p 128 -n 32 -t 2 -r 1` process
// reports its peak RSS (rss-MiB), compared with the bound file + KV cache
// + largest arena + 10% from `inspect --json` (bound-MiB; rss/bound is
// their ratio, at most 1 when the target is met). The page cache is warm:
// the artifact was just written.
func BenchmarkQwen3ShapeLoad(b *testing.B) { shapeLoad(b, qwen3Shape()) }

// shapeLoad builds the artifact of cfg and measures it as
// BenchmarkQwen3ShapeLoad describes.
func shapeLoad(b *testing.B, cfg tinymodel.Config) {
	dir := b.TempDir()
	hf, q, art := filepath.Join(dir, "hf"), filepath.Join(dir, "q"), filepath.Join(dir, "m.aot")
	tok := filepath.Dir(testutil.Path(b, "tokenizers/qwen2.5/vocab.json"))
	tokCfg := testutil.Path(b, "tokenizers/qwen3/tokenizer_config.json")

	start := time.Now()
	if err := tinymodel.WriteLlama(hf, cfg, 1); err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{filepath.Join(tok, "vocab.json"), filepath.Join(tok, "merges.txt"), tokCfg} {
		if err := copyInto(f, hf); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	b.Logf("wrote the HF folder in %v", time.Since(start).Round(time.Second))
	start = time.Now()
	benchCLI(b, "quantize", hf, "-o", q, "--recipe", "w4a16-lpbq")
	os.RemoveAll(hf)
	runtime.GC()
	b.Logf("quantized in %v", time.Since(start).Round(time.Second))
	start = time.Now()
	benchCLI(b, "compile", q, "-o", art, "--ar-len", "32", "--ctx", "1024", "--kv", "u8")
	os.RemoveAll(q)
	runtime.GC()
	b.Logf("compiled in %v", time.Since(start).Round(time.Second))

	var sz shapeSizes
	if err := json.Unmarshal([]byte(benchCLI(b, "inspect", art, "--json")), &sz); err != nil {
		b.Fatalf("inspect --json: %v", err)
	}

	var open, sess, dec time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		e, err := engine.Open(art)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s, err := e.NewSession(engine.SessionOptions{Mode: engine.ModeKV, Threads: 2})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := s.Decode(1); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		s.Close()
		e.Close()
		open, sess, dec = open+t1.Sub(t0), sess+t2.Sub(t1), dec+t3.Sub(t2)
		n++
	}
	perMs := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(perMs(open), "open-ms")
	b.ReportMetric(perMs(sess), "session-ms")
	b.ReportMetric(perMs(dec), "decode-ms")

	rssMB, benchLoad := benchProcess(b, art)
	var arena int64
	for _, a := range sz.Sizes.Arenas {
		arena = max(arena, a.Bytes)
	}
	base := sz.Sizes.File + sz.Sizes.KV.Bytes + arena
	bound := float64(base) * 1.1 / (1 << 20)
	b.ReportMetric(float64(sz.Sizes.File)/(1<<20), "file-MiB")
	b.ReportMetric(float64(sz.Sizes.KV.Bytes)/(1<<20), "kv-MiB")
	b.ReportMetric(float64(arena)/(1<<20), "arena-MiB")
	b.ReportMetric(bound, "bound-MiB")
	b.ReportMetric(rssMB, "rss-MiB")
	b.ReportMetric(rssMB/bound, "rss/bound")
	b.ReportMetric(benchLoad, "bench-load-ms")
	b.Logf("file %d B, kv %d B, arena %d B: bound (file+kv+arena)*1.1 = %.1f MiB; bench process peak RSS %.1f MiB, load %.1f ms",
		sz.Sizes.File, sz.Sizes.KV.Bytes, arena, bound, rssMB, benchLoad)
}

// benchCLI runs the command line in-process and returns its stdout,
// failing the benchmark on a non-zero exit.
func benchCLI(b *testing.B, args ...string) string {
	b.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		b.Fatalf("aotlm %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

// benchProcess builds the command and runs `aotlm bench` on art in a fresh
// process, returning its reported peak RSS in MiB and load time in ms.
func benchProcess(b *testing.B, art string) (rssMB, loadMs float64) {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "aotlm")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v: %s", err, out)
	}
	cmd := exec.Command(bin, "bench", "-m", art, "-p", "128", "-n", "32", "-t", "2", "-r", "1", "--json")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("aotlm bench: %v: %s", err, errb.String())
	}
	var rep benchJSON
	if err := json.Unmarshal(out, &rep); err != nil {
		b.Fatalf("aotlm bench --json: %v: %s", err, out)
	}
	if rep.RSSMB <= 0 {
		b.Fatalf("aotlm bench reported no peak RSS: %s", out)
	}
	b.Logf("aotlm bench: %s", bytes.TrimSpace(out))
	return rep.RSSMB, rep.LoadMs
}

// copyInto copies the file src into the folder dir.
func copyInto(src, dir string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), data, 0o644); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}
