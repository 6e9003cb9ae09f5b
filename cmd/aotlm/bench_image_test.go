package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/visionload"
)

// TestBenchImage: `bench --image` on the tiny SmolVLM fixture reports
// the image's tiles, its embedding rows and prompt, the times of each step
// over the repetitions, and the usual tests when asked for.
func TestBenchImage(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	t.Setenv(compile.CacheEnv, t.TempDir())
	tok := filepath.Join(dir, "text.gguf")
	code, out, errs := runCLI(t, "bench", "-m", dir, "--tokenizer", tok, "--image", filepath.Join(dir, "image_wide.png"),
		"-p", "8", "-n", "4", "-r", "2", "-t", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep visionload.BenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// a 96x64 image: one 1x1-grid slice and the overview, 16 rows each;
	// BOS, 6 marker tokens and the rows
	if rep.Width != 96 || rep.Height != 64 || rep.Tiles != 2 || rep.Rows != 32 || rep.Prompt != 39 || rep.Repetitions != 2 {
		t.Fatalf("report %+v", rep)
	}
	if rep.EncodeMs.Mean <= 0 || rep.PrefillMs.Mean <= 0 || rep.PrefillTokS.Mean <= 0 || rep.ImageEncodeTot.Mean < rep.EncodeMs.Mean {
		t.Fatalf("times %+v", rep)
	}
	if rep.Bench == nil || len(rep.Bench.Tests) != 2 {
		t.Fatalf("usual tests: %+v", rep.Bench)
	}
	code, out, errs = runCLI(t, "bench", "-m", dir, "--tokenizer", tok, "--image", filepath.Join(dir, "image_square.png"),
		"-p", "0", "-n", "0", "-r", "1", "-t", "1")
	if code != 0 || !strings.Contains(out, "preprocess + encode") || !strings.Contains(out, "tok/s") || strings.Contains(out, "pp8") {
		t.Fatalf("table: exit %d: %s %s", code, out, errs)
	}
	code, _, errs = runCLI(t, "bench", "-m", tok, "--image", filepath.Join(dir, "image_square.png"), "-p", "0", "-n", "0")
	if code == 0 || !strings.Contains(errs, "vision-language model") {
		t.Fatalf("text model: exit %d: %s", code, errs)
	}
}

// TestBenchImageQwen2VL: `bench --image` on the tiny Qwen2-VL fixture
// times its compiled vision plans (one chunk per image) and the prefill
// of the image's layout (<|vision_start|>, the rows at their M-RoPE
// positions, <|vision_end|>).
func TestBenchImageQwen2VL(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	art := compileQwen2VL(t, dir)
	code, out, errs := runCLI(t, "bench", "-m", art, "--image", filepath.Join(dir, "image_wide.png"),
		"-p", "0", "-n", "0", "-r", "2", "-t", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep visionload.BenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// a 100x60 image smart-resized to 96x64 (a compiled size): 4x6 rows
	// between two markers
	if rep.Width != 100 || rep.Height != 60 || rep.Tiles != 1 || rep.Rows != 24 || rep.Prompt < 26 || rep.Prompt > 27 ||
		rep.Encoder != "the artifact's vision plans" {
		t.Fatalf("report %+v", rep)
	}
	if rep.EncodeMs.Mean <= 0 || rep.PrefillMs.Mean <= 0 || rep.ImageEncodeTot.Mean < rep.EncodeMs.Mean {
		t.Fatalf("times %+v", rep)
	}
}
