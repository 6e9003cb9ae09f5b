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

// TestRunImage: `run --image` on the tiny SmolVLM fixture (its tokenizer
// from the llama.cpp GGUF beside it) places the image as llama.cpp's mtmd
// does (slice, then overview, between its marker tokens) and generates
// the greedy ids the interpreter gives for the same prompt with the
// image's embedding rows.
func TestRunImage(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	img := filepath.Join(dir, "image_wide.png")
	code, out, errs := runCLI(t, "run", "-m", dir, "--tokenizer", filepath.Join(dir, "text.gguf"), "--image", img,
		"-p", "abc<image>xyz", "-n", "6", "--temp", "0", "--ignore-eos", "--json", "-t", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		PromptIDs []int   `json:"prompt_ids"`
		IDs       []int   `json:"ids"`
		Images    int     `json:"images"`
		EncodeMs  float64 `json:"image_encode_ms"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// the mtmd layout of a one-tile image: 259 <fake_token_around_image>,
	// 262 <row_1_col_1>, 16 x 260, 267 "\n\n", 259, 261 <global-img>, 16 x
	// 260, 259
	var want []int
	want = append(want, 259, 262)
	for range 16 {
		want = append(want, 260)
	}
	want = append(want, 267, 259, 261)
	for range 16 {
		want = append(want, 260)
	}
	want = append(want, 259)
	joined := func(v []int) string {
		b, _ := json.Marshal(v)
		return strings.Trim(string(b), "[]")
	}
	if !strings.Contains(joined(rep.PromptIDs), joined(want)) {
		t.Fatalf("prompt ids %v do not hold the image layout %v", rep.PromptIDs, want)
	}
	if rep.Images != 1 || rep.EncodeMs <= 0 || len(rep.IDs) != 6 {
		t.Fatalf("report %+v", rep)
	}

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
	rows := append(append([]float32(nil), enc.Slices[0]...), enc.Overview...)
	seq := make([]int, len(rep.PromptIDs))
	emb := make([]float32, len(seq)*D)
	k := 0
	for i, id := range rep.PromptIDs {
		seq[i] = id
		if id == m.VLM.Vision.ImageTokenID {
			seq[i] = -1
			copy(emb[i*D:], rows[k*D:(k+1)*D])
			k++
		}
	}
	for step, want := range rep.IDs {
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
		if best != want {
			t.Fatalf("step %d: run gave %d, the interpreter %d", step, want, best)
		}
		seq = append(seq, best)
		emb = append(emb, make([]float32, D)...)
	}
}

// TestRunImageGGUFPair: the same image and prompt through llama.cpp's
// text GGUF + mmproj GGUF give the ids the Hugging Face folder gives.
func TestRunImageGGUFPair(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	tok := filepath.Join(dir, "text.gguf")
	args := []string{"--image", filepath.Join(dir, "image_square.png"), "-p", "hello", "-n", "6", "--temp", "0",
		"--ignore-eos", "--json", "-t", "1"}
	var reps [2]runJSON
	for i, src := range [][]string{{"-m", dir, "--tokenizer", tok}, {"-m", tok, "--mmproj", filepath.Join(dir, "mmproj.gguf")}} {
		code, out, errs := runCLI(t, append(append([]string{"run"}, src...), args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", src, code, errs)
		}
		if err := json.Unmarshal([]byte(out), &reps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if joinedIDs(reps[0].PromptIDs) != joinedIDs(reps[1].PromptIDs) || joinedIDs(reps[0].IDs) != joinedIDs(reps[1].IDs) {
		t.Fatalf("folder gave %v -> %v, GGUF pair %v -> %v", reps[0].PromptIDs, reps[0].IDs, reps[1].PromptIDs, reps[1].IDs)
	}
}

func joinedIDs(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRunImageErrors(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	tok := filepath.Join(dir, "text.gguf")
	img := filepath.Join(dir, "image_square.png")
	bad := filepath.Join(t.TempDir(), "bad.png")
	if err := os.WriteFile(bad, []byte("not a picture"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", img, "--image", img, "-p", "<image> only one"}, "1 <image> markers for 2 images"},
		{[]string{"--image", bad, "-p", "x"}, "not an image"},
		{[]string{"--image", filepath.Join(dir, "missing.png"), "-p", "x"}, "missing.png"},
	} {
		args := append([]string{"run", "-m", dir, "--tokenizer", tok, "-n", "2", "--temp", "0"}, c.args...)
		code, _, errs := runCLI(t, args...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
	code, _, errs := runCLI(t, "run", "-m", tok, "--image", img, "-p", "x", "-n", "1")
	if code == 0 || !strings.Contains(errs, "vision-language") {
		t.Errorf("text model with --image: exit %d, %q", code, errs)
	}
}
