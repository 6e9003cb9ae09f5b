package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// TestRunImageQwen2VL: `run --image` on the tiny Qwen2-VL fixture, from
// the Hugging Face folder (tokenizer from the GGUF beside it) and from
// the GGUF pair, compiled with the image's smart-resized size among its
// vision plans' sizes, places the image as mtmd does (<|vision_start|>,
// 4x6 <|image_pad|> rows for the 100x60 image, <|vision_end|>) and
// generates the greedy ids the interpreter gives for the same prompt with
// the image's rows at their M-RoPE positions.
func TestRunImageQwen2VL(t *testing.T) {
	checkRunImageQwen(t, testutil.Path(t, "vlm/qwen2vl"), "128x128,64x96", 24)
}

// TestRunImageQwen25VL: the same for the tiny Qwen2.5-VL fixture (its
// 150x70 image: 4x9 image rows, in two attention windows).
func TestRunImageQwen25VL(t *testing.T) {
	checkRunImageQwen(t, "../../internal/vlm/testdata/qwen25vl", "128x128,64x144", 36)
}

// checkRunImageQwen runs `run --image` on the image_wide.png of the
// Qwen2-VL / Qwen2.5-VL fixture in dir, compiled with buckets, from the
// folder and from the GGUF pair, and checks the n image rows of the
// prompt and the greedy ids against the interpreter.
func checkRunImageQwen(t *testing.T, dir, buckets string, n int) {
	tok := filepath.Join(dir, "text.gguf")
	img := filepath.Join(dir, "image_wide.png")
	args := []string{"--image", img, "--vision-buckets", buckets, "-p", "abc<image>xyz", "-n", "6", "--temp", "0", "--ignore-eos", "--json", "-t", "1"}
	hf, err := vlm.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := vlm.OpenPair(tok, filepath.Join(dir, "mmproj.gguf"), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		src  []string
		m    *vlm.Model
	}{{"folder", []string{"-m", dir, "--tokenizer", tok}, hf}, {"gguf pair", []string{"-m", tok, "--mmproj", filepath.Join(dir, "mmproj.gguf")}, pair}} {
		code, out, errs := runCLI(t, append(append([]string{"run"}, c.src...), args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		var rep struct {
			PromptIDs []int `json:"prompt_ids"`
			IDs       []int `json:"ids"`
			Images    int   `json:"images"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, out)
		}
		// 262 <|vision_start|>, n x 265 <|image_pad|>, 263 <|vision_end|>
		start := -1
		for i, id := range rep.PromptIDs {
			if id == 262 {
				start = i
				break
			}
		}
		if start < 0 || start+n+2 > len(rep.PromptIDs) || rep.PromptIDs[start+n+1] != 263 {
			t.Fatalf("%s: prompt ids %v do not hold the image layout", c.name, rep.PromptIDs)
		}
		for _, id := range rep.PromptIDs[start+1 : start+n+1] {
			if id != 265 {
				t.Fatalf("%s: prompt ids %v do not hold %d image rows", c.name, rep.PromptIDs, n)
			}
		}
		if rep.Images != 1 || len(rep.IDs) != 6 {
			t.Fatalf("%s: report %+v", c.name, rep)
		}

		im, err := vision.DecodeFile(img, vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := c.m.Encode(im)
		if err != nil {
			t.Fatal(err)
		}
		piece := func(s string) (int, bool) {
			return map[string]int{vlm.VisionStart: 262, vlm.VisionEnd: 263}[s], s == vlm.VisionStart || s == vlm.VisionEnd
		}
		p, err := c.m.Place(enc, piece)
		if err != nil {
			t.Fatal(err)
		}
		V := c.m.TextConfig().Vocab
		seq := vlm.NewSequence(c.m.TextConfig().Hidden, c.m.PosComponents())
		seq.Text(rep.PromptIDs[:start]...)
		if err := seq.Image(p); err != nil {
			t.Fatal(err)
		}
		seq.Text(rep.PromptIDs[start+n+2:]...)
		for step, want := range rep.IDs {
			logits, err := c.m.LogitsAt(seq.IDs, seq.Embeds, seq.Positions)
			if err != nil {
				t.Fatal(err)
			}
			last := logits[(len(seq.IDs)-1)*V:]
			best := 0
			for j, v := range last {
				if v > last[best] {
					best = j
				}
			}
			if best != want {
				t.Fatalf("%s: step %d: run gave %d, the interpreter %d", c.name, step, want, best)
			}
			seq.Text(best)
		}
	}
}
