package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// TestRunImageInternVL: `run --image` on the tiny InternVL3 fixture's
// wide image, from the Hugging Face folder (tokenizer from the GGUF
// beside it) and from the GGUF pair, places it between <img> and </img>
// with as many <IMG_CONTEXT> rows as the reference says Hugging Face's
// grid and thumbnail take by default (48 for the 160x90 image: 2x1 tiles
// and the thumbnail) and mtmd's grid and overview take with
// --vision-llama-cpp (112: 3x2 and the overview); and generates the
// greedy ids the interpreter gives for the same prompt.
func TestRunImageInternVL(t *testing.T) {
	dir := testutil.Path(t, "vlm/internvl3")
	tok, mm := filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj.gguf")
	img := filepath.Join(dir, "image_wide.png")
	var ref struct {
		Cases []struct {
			Image string `json:"image"`
			HF    struct {
				Tokens int `json:"n_image_tokens"`
			} `json:"hf_dynamic_preprocess_would_use"`
			MTMD struct {
				Tokens int `json:"n_image_tokens"`
			} `json:"mtmd_tiles"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "vlm/internvl3/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	hfRows, cppRows := 0, 0
	for _, c := range ref.Cases {
		if c.Image == "image_wide.png" {
			hfRows, cppRows = c.HF.Tokens, c.MTMD.Tokens
		}
	}
	if hfRows == 0 || cppRows == 0 {
		t.Fatal("the reference has no image_wide.png case")
	}
	for _, mode := range []struct {
		flags []string
		opts  vlm.Options
		rows  int
	}{{nil, vlm.Options{}, hfRows}, {[]string{"--vision-llama-cpp"}, vlm.Options{LlamaCpp: true}, cppRows}} {
		hf, err := vlm.OpenWith(dir, 1, mode.opts)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := vlm.OpenPairWith(tok, mm, 1, mode.opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			src  []string
			m    *vlm.Model
		}{{"folder", []string{"-m", dir, "--tokenizer", tok}, hf}, {"gguf pair", []string{"-m", tok, "--mmproj", mm}, pair}} {
			args := append(append([]string{"run"}, c.src...), "--image", img, "-p", "abc<image>xyz", "-n", "5", "--temp", "0",
				"--ignore-eos", "--json", "-t", "1", "--vision-weights", "f32")
			code, out, errs := runCLI(t, append(args, mode.flags...)...)
			if code != 0 {
				t.Fatalf("%s %v: exit %d: %s", c.name, mode.flags, code, errs)
			}
			var rep struct {
				PromptIDs []int `json:"prompt_ids"`
				IDs       []int `json:"ids"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%s: %v: %s", c.name, err, out)
			}
			// 262 <img>, rows x 264 <IMG_CONTEXT>, 263 </img>
			start := -1
			for i, id := range rep.PromptIDs {
				if id == 262 {
					start = i
					break
				}
			}
			n := mode.rows
			if start < 0 || start+n+2 > len(rep.PromptIDs) || rep.PromptIDs[start+n+1] != 263 || len(rep.IDs) != 5 {
				t.Fatalf("%s %v: prompt ids %v, ids %v: not %d image rows between <img> and </img>", c.name, mode.flags, rep.PromptIDs, rep.IDs, n)
			}
			for _, id := range rep.PromptIDs[start+1 : start+n+1] {
				if id != 264 {
					t.Fatalf("%s %v: prompt ids %v do not hold %d image rows", c.name, mode.flags, rep.PromptIDs, n)
				}
			}
			im, err := vision.DecodeFile(img, vision.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := c.m.Encode(im)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.m.Place(enc, func(s string) (int, bool) {
				id, ok := map[string]int{vlm.ImgStart: 262, vlm.ImgEnd: 263}[s]
				return id, ok
			})
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
				logits, err := c.m.Logits(seq.IDs, seq.Embeds)
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
					t.Fatalf("%s %v: step %d: run gave %d, the interpreter %d", c.name, mode.flags, step, want, best)
				}
				seq.Text(best)
			}
		}
	}
}

// TestPrompterInternVLMatchesLlamaCpp: the images of an InternVL artifact
// compiled with --vision-llama-cpp (float32 encoder) through the
// runtime's sessions (the path chat and serve take) are laid out as mtmd
// does, <img>, 16 or 112 rows in place of <IMG_CONTEXT>, </img>, and give
// llama.cpp's logits after each fixture's prefix, image and suffix within
// 1e-3 and its 8 greedy ids.
func TestPrompterInternVLMatchesLlamaCpp(t *testing.T) {
	dir := testutil.Path(t, "vlm/internvl3")
	out := filepath.Join(t.TempDir(), "internvl.aot")
	code, _, errs := runCLI(t, "compile", dir, "--tokenizer", filepath.Join(dir, "text.gguf"), "--vision-llama-cpp",
		"--vision-weights", "f32", "-o", out, "--ctx", "256", "--ar-len", "8")
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, errs)
	}
	checkPrompter(t, dir, out, 264, 1e-3)
}
