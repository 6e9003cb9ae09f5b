package main

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// qwenInterpreterGreedy returns the n greedy ids the graph interpreter
// (the Qwen2-VL folder's encoder and M-RoPE text model) gives after
// promptIDs, whose one image (<|vision_start|> ... <|vision_end|>) takes
// img's embedding rows at their M-RoPE positions.
func qwenInterpreterGreedy(t *testing.T, dir, img string, promptIDs []int, n int) []int {
	t.Helper()
	return qwenInterpreterGreedyImages(t, dir, []string{img}, promptIDs, n)
}

// TestRunQwen2VLImageFromArtifactAlone: the Qwen2-VL fixture compiled
// from its folder and from its GGUF pair, with the image sizes of its two
// images among --vision-buckets, its source files then deleted, runs
// --image from the artifact alone (the vision plans, the preprocessing
// config and the marker ids it carries) and generates the greedy ids of
// the graph interpreter over the source folder for each image; inspect
// lists every vision plan. An image whose aspect ratio no size holds is
// refused, naming the sizes.
func TestRunQwen2VLImageFromArtifactAlone(t *testing.T) {
	checkQwenImageFromArtifactAlone(t, testutil.Path(t, "vlm/qwen2vl"), "64x64,64x96,128x128", "64x64, 64x96, 128x128",
		[]string{"vision/64x64", "vision/64x96", "vision/128x128", "64 rows in, 16 tokens out",
			"96 rows in, 24 tokens out", "256 rows in, 64 tokens out", "vision/64x96 arena"})
}

// TestRunQwen25VLImageFromArtifactAlone: the same for the tiny
// Qwen2.5-VL fixture (window attention in its vision plans).
func TestRunQwen25VLImageFromArtifactAlone(t *testing.T) {
	checkQwenImageFromArtifactAlone(t, "../../internal/vlm/testdata/qwen25vl", "128x128,64x144", "128x128, 64x144",
		[]string{"vision/128x128", "vision/64x144", "256 rows in, 64 tokens out", "144 rows in, 36 tokens out"})
}

// checkQwenImageFromArtifactAlone compiles the fixture in dir for buckets
// (listed as sizes in errors), deletes the source and checks run --image
// against the interpreter, the refusal of an image no size holds, and
// that inspect shows each of inspectWants.
func checkQwenImageFromArtifactAlone(t *testing.T, dir, buckets, sizes string, inspectWants []string) {
	imgDir := t.TempDir()
	imgs := []string{filepath.Join(imgDir, "square.png"), filepath.Join(imgDir, "wide.png")}
	copyFile(t, filepath.Join(dir, "image_square.png"), imgs[0])
	copyFile(t, filepath.Join(dir, "image_wide.png"), imgs[1])
	narrow := filepath.Join(imgDir, "narrow.png")
	writePNG(t, narrow, 1000, 40)
	for _, from := range []string{"hf", "gguf"} {
		t.Run(from, func(t *testing.T) {
			src := t.TempDir()
			args := []string{"compile"}
			switch from {
			case "hf":
				for _, f := range []string{"config.json", "preprocessor_config.json", "model.safetensors", "text.gguf"} {
					copyFile(t, filepath.Join(dir, f), filepath.Join(src, f))
				}
				args = append(args, src, "--tokenizer", filepath.Join(src, "text.gguf"))
			case "gguf":
				text, mm := filepath.Join(src, "text.gguf"), filepath.Join(src, "mmproj.gguf")
				copyFile(t, filepath.Join(dir, "text.gguf"), text)
				copyFile(t, filepath.Join(dir, "mmproj.gguf"), mm)
				args = append(args, text, "--mmproj", mm)
			}
			out := filepath.Join(t.TempDir(), "qwen2vl.aot")
			args = append(args, "--vision-buckets", buckets, "-o", out, "--ctx", "128", "--ar-len", "8")
			if code, _, errs := runCLI(t, args...); code != 0 {
				t.Fatalf("compile: exit %d: %s", code, errs)
			}
			if err := os.RemoveAll(src); err != nil {
				t.Fatal(err)
			}
			for _, img := range imgs {
				code, got, errs := runCLI(t, "run", "-m", out, "--image", img, "-p", "abc<image>xyz", "-n", "6", "--temp", "0",
					"--ignore-eos", "--json", "-t", "1")
				if code != 0 {
					t.Fatalf("run %s: exit %d: %s", img, code, errs)
				}
				var rep runJSON
				if err := json.Unmarshal([]byte(got), &rep); err != nil {
					t.Fatalf("%v: %s", err, got)
				}
				want := qwenInterpreterGreedy(t, dir, img, rep.PromptIDs, 6)
				if joinedIDs(rep.IDs) != joinedIDs(want) {
					t.Fatalf("%s: the artifact gave %v, the interpreter %v", img, rep.IDs, want)
				}
			}
			code, _, errs := runCLI(t, "run", "-m", out, "--image", narrow, "-p", "abc<image>xyz", "-n", "2", "-t", "1")
			if code == 0 || !strings.Contains(errs, "no compiled image size") || !strings.Contains(errs, sizes) {
				t.Fatalf("a 1000x40 image: exit %d: %s", code, errs)
			}
			code, ins, errs := runCLI(t, "inspect", out)
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, errs)
			}
			for _, w := range inspectWants {
				if !strings.Contains(ins, w) {
					t.Errorf("inspect does not show %q:\n%s", w, ins)
				}
			}
		})
	}
}

// writePNG writes a w x h gradient PNG.
func writePNG(t *testing.T, path string, w, h int) {
	t.Helper()
	im := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			im.Set(x, y, color.NRGBA{R: uint8(x), G: uint8(y * 5), B: uint8(x + y), A: 255})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, im); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunQwen2VLFallback: run -m FOLDER compiles the encoder for its
// sizes; an image no size holds (100x60, smart-resized to 96x64, with
// only 64x64 compiled) is encoded by the folder's encoder in the graph
// interpreter instead: its 4x6 rows, and the interpreter's greedy ids.
func TestRunQwen2VLFallback(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	img := filepath.Join(dir, "image_wide.png")
	code, got, errs := runCLI(t, "run", "-m", dir, "--tokenizer", filepath.Join(dir, "text.gguf"), "--vision-buckets", "64x64",
		"--image", img, "-p", "abc<image>xyz", "-n", "6", "--temp", "0", "--ignore-eos", "--json", "-t", "1")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	var rep runJSON
	if err := json.Unmarshal([]byte(got), &rep); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	n := 0
	for _, id := range rep.PromptIDs {
		if id == 265 {
			n++
		}
	}
	if n != 24 {
		t.Fatalf("%d image rows in %v, want 24", n, rep.PromptIDs)
	}
	want := qwenInterpreterGreedy(t, dir, img, rep.PromptIDs, 6)
	if joinedIDs(rep.IDs) != joinedIDs(want) {
		t.Fatalf("run gave %v, the interpreter %v", rep.IDs, want)
	}
}
