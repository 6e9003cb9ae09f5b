package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// interpreterGreedy returns the n greedy ids the graph interpreter (the
// folder's encoder and text model) gives after promptIDs, whose image
// token rows take the image's embedding rows in order.
func interpreterGreedy(t *testing.T, dir, img string, promptIDs []int, n int) []int {
	t.Helper()
	m, err := vlm.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	im, err := vision.DecodeFile(img, vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := m.Encode(im)
	if err != nil {
		t.Fatal(err)
	}
	D, V := m.TextConfig().Hidden, m.TextConfig().Vocab
	var rows []float32
	for _, s := range enc.Slices {
		rows = append(rows, s...)
	}
	rows = append(rows, enc.Overview...)
	seq := append([]int(nil), promptIDs...)
	emb := make([]float32, len(seq)*D)
	k := 0
	for i, id := range seq {
		if id == m.VLM.Vision.ImageTokenID {
			seq[i] = -1
			copy(emb[i*D:], rows[k*D:(k+1)*D])
			k++
		}
	}
	if k*D != len(rows) {
		t.Fatalf("the prompt places %d image rows of %d", k, len(rows)/D)
	}
	var ids []int
	for range n {
		logits, err := m.Logits(seq, emb)
		if err != nil {
			t.Fatal(err)
		}
		last := logits[(len(seq)-1)*V:]
		best := 0
		for j, v := range last {
			if v > last[best] {
				best = j
			}
		}
		ids = append(ids, best)
		seq = append(seq, best)
		emb = append(emb, make([]float32, D)...)
	}
	return ids
}

// TestRunImageFromArtifactAlone: the GGUF pair compiled with --mmproj into
// one artifact, its source files then deleted, runs --image from the
// artifact alone (the vision plan, the preprocessing config and the
// marker ids it carries) and generates the greedy ids of the graph
// interpreter over the source folder; inspect lists the vision plan and
// its sizes. With --vision-weights f16 or w8 it still runs, and inspect
// says which, with the weight bytes by layout.
func TestRunImageFromArtifactAlone(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	img := filepath.Join(t.TempDir(), "photo.png")
	copyFile(t, filepath.Join(dir, "image_wide.png"), img)
	for _, weights := range []string{"f32", "f16", "w8"} {
		t.Run(weights, func(t *testing.T) {
			src := t.TempDir()
			text, mm := filepath.Join(src, "text.gguf"), filepath.Join(src, "mmproj.gguf")
			copyFile(t, filepath.Join(dir, "text.gguf"), text)
			copyFile(t, filepath.Join(dir, "mmproj.gguf"), mm)
			out := filepath.Join(t.TempDir(), "vlm.aot")
			code, _, errs := runCLI(t, "compile", text, "--mmproj", mm, "--vision-weights", weights, "-o", out, "--ctx", "128", "--ar-len", "8")
			if code != 0 {
				t.Fatalf("compile: exit %d: %s", code, errs)
			}
			if err := os.RemoveAll(src); err != nil {
				t.Fatal(err)
			}
			code, got, errs := runCLI(t, "run", "-m", out, "--image", img, "-p", "abc<image>xyz", "-n", "6", "--temp", "0",
				"--ignore-eos", "--json", "-t", "1")
			if code != 0 {
				t.Fatalf("run: exit %d: %s", code, errs)
			}
			var rep runJSON
			if err := json.Unmarshal([]byte(got), &rep); err != nil {
				t.Fatalf("%v: %s", err, got)
			}
			if len(rep.IDs) != 6 {
				t.Fatalf("%d ids generated, want 6", len(rep.IDs))
			}
			if weights == "f32" {
				want := interpreterGreedy(t, dir, img, rep.PromptIDs, 6)
				if joinedIDs(rep.IDs) != joinedIDs(want) {
					t.Fatalf("the artifact gave %v, the interpreter %v", rep.IDs, want)
				}
			}
			code, ins, errs := runCLI(t, "inspect", out)
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, errs)
			}
			layout := map[string]string{"f32": "(f32 ", "f16": "f16-rows ", "w8": "w8-rows-p "}[weights]
			for _, w := range []string{"vision/128x128", "64 rows in, 16 tokens out", weights + ")", "vision/128x128 arena", "vision/128x128 weights", layout} {
				if !strings.Contains(ins, w) {
					t.Errorf("inspect does not show %q:\n%s", w, ins)
				}
			}
		})
	}
}

// TestRunImageNoCompile: with --no-compile the encoder and the text model
// run in the graph interpreter, and give the greedy ids the compiled
// artifact (vision plan and text plans) gives for the same prompt.
func TestRunImageNoCompile(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	img := filepath.Join(dir, "image_square.png")
	args := []string{"run", "-m", dir, "--tokenizer", filepath.Join(dir, "text.gguf"), "--image", img,
		"-p", "abc<image>xyz", "-n", "6", "--temp", "0", "--ignore-eos", "--json", "-t", "1"}
	var reps [2]runJSON
	for i, extra := range [][]string{nil, {"--no-compile"}} {
		code, out, errs := runCLI(t, append(append([]string(nil), args...), extra...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, errs)
		}
		if err := json.Unmarshal([]byte(out), &reps[i]); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if len(reps[1].IDs) != 6 || joinedIDs(reps[0].PromptIDs) != joinedIDs(reps[1].PromptIDs) || joinedIDs(reps[0].IDs) != joinedIDs(reps[1].IDs) {
		t.Fatalf("compiled %v -> %v, --no-compile %v -> %v", reps[0].PromptIDs, reps[0].IDs, reps[1].PromptIDs, reps[1].IDs)
	}
}
