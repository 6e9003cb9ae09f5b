package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// qwenFixtures are the tiny Qwen2-VL and Qwen2.5-VL fixtures and the
// sizes (HxW) their two images are smart-resized to.
var qwenFixtures = []struct{ name, buckets string }{
	{"qwen2vl", "64x64,64x96"},
	{"qwen25vl", "128x128,64x144"},
}

// qwenFixtureDir is where fixture name lives: the shared test data's
// Qwen2-VL, the vlm package's Qwen2.5-VL.
func qwenFixtureDir(t *testing.T, name string) string {
	if name == "qwen25vl" {
		return "../../internal/vlm/testdata/qwen25vl"
	}
	return testutil.Path(t, "vlm/"+name)
}

// compileQwen2VL compiles the tiny Qwen2-VL fixture with its two images'
// sizes among the vision plans and returns the artifact's path.
func compileQwen2VL(t *testing.T, dir string) string {
	return compileQwenAt(t, dir, qwenFixtures[0].buckets)
}

// compileQwenAt compiles a Qwen fixture with its encoder planned for
// buckets and returns the artifact's path.
func compileQwenAt(t *testing.T, dir, buckets string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "qwen.aot")
	code, _, errs := runCLI(t, "compile", dir, "--tokenizer", filepath.Join(dir, "text.gguf"), "--vision-buckets", buckets,
		"-o", out, "--ctx", "256", "--ar-len", "8")
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, errs)
	}
	return out
}

// TestPrompterQwen2VLMatchesLlamaCpp: the images of a Qwen2-VL and of a
// Qwen2.5-VL artifact through the runtime's sessions (the path chat and
// serve take: an image's rows as embedding ids of a request, placed at
// M-RoPE positions by the session) give llama.cpp's logits after each
// fixture's prefix, image and suffix (within the reference's end-to-end
// tolerance) and its 8 greedy ids; the prompt is mtmd's layout, image rows
// in place of <|image_pad|>.
func TestPrompterQwen2VLMatchesLlamaCpp(t *testing.T) {
	for _, f := range qwenFixtures {
		t.Run(f.name, func(t *testing.T) {
			dir := qwenFixtureDir(t, f.name)
			checkPrompter(t, dir, compileQwenAt(t, dir, f.buckets), 265, 0)
		})
	}
}

// checkPrompter checks the images of the fixture in dir through the
// prompter of artifact art (compiled from it): the prompt of each case is
// mtmd's layout with the image rows as imageID, the logits after it are
// llama.cpp's within tol (0: the reference's end-to-end tolerance) and
// the 8 greedy ids are equal.
func checkPrompter(t *testing.T, dir, art string, imageID int, tol float64) {
	var ref struct {
		Cases []struct {
			Image  string      `json:"image"`
			Prefix []int       `json:"prefix_ids"`
			Suffix []int       `json:"suffix_ids"`
			HFIDs  []int       `json:"input_ids_hf_style"`
			Logits [][]float64 `json:"logits"`
			Greedy []int       `json:"greedy"`
		} `json:"cases"`
		Tol struct {
			Logits float64 `json:"logits_atol_end_to_end"`
		} `json:"suggested_tolerances"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) < 2 || ref.Tol.Logits <= 0 {
		t.Fatalf("reference: %d cases, logits tolerance %g", len(ref.Cases), ref.Tol.Logits)
	}
	if tol == 0 {
		tol = ref.Tol.Logits
	}
	m, err := aotlm.Open(art, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := openPrompter("", "", m, 1, false)
	if err != nil || p == nil {
		t.Fatalf("prompter: %v", err)
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range ref.Cases {
		data, err := os.ReadFile(filepath.Join(dir, c.Image))
		if err != nil {
			t.Fatal(err)
		}
		images := p.NewImages()
		ph, err := images.Add(data)
		if err != nil {
			t.Fatal(err)
		}
		layout, err := images.Encode(ph)
		if err != nil {
			t.Fatal(err)
		}
		ids := slices.Concat(c.Prefix, layout, c.Suffix)
		hf := slices.Clone(ids)
		for i, id := range hf {
			if aotlm.IsEmbedID(id) {
				hf[i] = imageID
			}
		}
		if !slices.Equal(hf, c.HFIDs) {
			t.Fatalf("%s: prompt %v, mtmd's %v", c.Image, hf, c.HFIDs)
		}
		var first []float32
		res, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, Raw: true, MaxTokens: len(c.Greedy), IgnoreEOS: true,
			Embeds: images.Embeds(), Logits: func(l []float32, gen []int) {
				if len(gen) == 0 {
					first = slices.Clone(l)
				}
			}}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.Image, err)
		}
		want := c.Logits[len(c.Logits)-1]
		if len(first) != len(want) {
			t.Fatalf("%s: %d logits, reference %d", c.Image, len(first), len(want))
		}
		d := 0.0
		for i, v := range want {
			d = math.Max(d, math.Abs(float64(first[i])-v))
		}
		t.Logf("%s: last-position logits within %.3g of llama.cpp's", c.Image, d)
		if d > tol {
			t.Errorf("%s: logits differ from llama.cpp's by %.3g > %g", c.Image, d, tol)
		}
		if !slices.Equal(res.IDs, c.Greedy) {
			t.Errorf("%s: greedy %v, llama.cpp %v", c.Image, res.IDs, c.Greedy)
		}
	}
}

// qwenInterpreterGreedyImages returns the n greedy ids the graph
// interpreter (the Qwen folder's encoder and M-RoPE text model) gives
// after promptIDs, whose image layouts (<|vision_start|>, <|image_pad|>
// rows, <|vision_end|>) take the embedding rows of imgs, in order, at
// their M-RoPE positions.
func qwenInterpreterGreedyImages(t *testing.T, dir string, imgs []string, promptIDs []int, n int) []int {
	t.Helper()
	const start = 262 // <|vision_start|>
	m, err := vlm.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	pieces := map[string]int{vlm.VisionStart: start, vlm.VisionEnd: 263}
	piece := func(s string) (int, bool) { id, ok := pieces[s]; return id, ok }
	seq := vlm.NewSequence(m.TextConfig().Hidden, m.PosComponents())
	at := 0
	for _, img := range imgs {
		i := at + slices.Index(promptIDs[at:], start)
		if i < at {
			t.Fatalf("prompt %v: fewer image layouts than %d images", promptIDs, len(imgs))
		}
		im, err := vision.DecodeFile(img, vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := m.Encode(im)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Place(enc, piece)
		if err != nil {
			t.Fatal(err)
		}
		// the prompt holds the layout, <|image_pad|> at each row
		for k, id := range p.IDs {
			if id == -1 {
				id = 265
			}
			if i+k >= len(promptIDs) || promptIDs[i+k] != id {
				t.Fatalf("prompt %v: no layout of %s's %dx%d rows at %d", promptIDs, img, enc.Rows, enc.Cols, i)
			}
		}
		seq.Text(promptIDs[at:i]...)
		if err := seq.Image(p); err != nil {
			t.Fatal(err)
		}
		at = i + len(p.IDs)
	}
	seq.Text(promptIDs[at:]...)
	V := m.TextConfig().Vocab
	var ids []int
	for range n {
		logits, err := m.LogitsAt(seq.IDs, seq.Embeds, seq.Positions)
		if err != nil {
			t.Fatal(err)
		}
		last := logits[(len(seq.IDs)-1)*V:]
		best := 0
		for k, v := range last {
			if v > last[best] {
				best = k
			}
		}
		ids = append(ids, best)
		seq.Text(best)
	}
	return ids
}

// TestChatServeImageQwen2VL: `chat` with /image and `serve` with an
// image_url part on a compiled Qwen2-VL and a Qwen2.5-VL artifact. The first chat turn
// gives what `run --image --chat` gives (the vlm package's own sequence);
// the second, with another image, reuses the cache past the first image
// and generates the graph interpreter's greedy ids over the whole
// conversation with both images at their M-RoPE positions; the server's
// reply to the first message is the first turn's.
func TestChatServeImageQwen2VL(t *testing.T) {
	for _, f := range qwenFixtures {
		t.Run(f.name, func(t *testing.T) { checkChatServeQwen(t, qwenFixtureDir(t, f.name), f.buckets) })
	}
}

func checkChatServeQwen(t *testing.T, dir, buckets string) {
	art := compileQwenAt(t, dir, buckets)
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(tpl, []byte(chatImageTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	wide, square := filepath.Join(dir, "image_wide.png"), filepath.Join(dir, "image_square.png")
	script := "/image " + wide + "\nWhat is it?\n/image " + square + "\nAnd <image> this?\n"
	turns, stderr := chatJSONTurns(t, script, "-m", art, "--chat-template", tpl, "--temp", "0", "-n", "5", "-t", "1")
	if len(turns) != 2 || strings.Count(stderr, "image attached") != 2 {
		t.Fatalf("%d turns, stderr %q", len(turns), stderr)
	}
	rcode, rout, rerr := runCLI(t, "run", "-m", art, "--chat-template", tpl, "--chat", "--image", wide,
		"-p", "What is it?", "-n", "5", "--temp", "0", "--json", "-t", "1")
	if rcode != 0 {
		t.Fatalf("run: exit %d: %s", rcode, rerr)
	}
	var rep runJSON
	if err := json.Unmarshal([]byte(rout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.IDs) == 0 || !slices.Equal(rep.IDs, turns[0].IDs) {
		t.Fatalf("turn 1 gave %v, run --image %v", turns[0].IDs, rep.IDs)
	}
	if turns[1].Reused < len(turns[0].PromptIDs) {
		t.Fatalf("turn 2 reused %d ids, the first turn's prompt has %d", turns[1].Reused, len(turns[0].PromptIDs))
	}
	plain := slices.Clone(turns[1].PromptIDs)
	for i, id := range plain {
		if aotlm.IsEmbedID(id) {
			plain[i] = 265
		}
	}
	// a turn may end early at an end-of-turn id; what it gave is the
	// interpreter's greedy continuation
	want := qwenInterpreterGreedyImages(t, dir, []string{wide, square}, plain, 5)
	if n := len(turns[1].IDs); n == 0 || !slices.Equal(turns[1].IDs, want[:n]) || (n < 5 && turns[1].StopReason == "length") {
		t.Fatalf("turn 2 gave %v (%s), the interpreter %v", turns[1].IDs, turns[1].StopReason, want)
	}

	data, err := os.ReadFile(wide)
	if err != nil {
		t.Fatal(err)
	}
	url := startServe(t, "-m", art, "--chat-template", tpl, "-t", "1", "--ctx", "256")
	client := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)}),
			openai.TextContentPart("What is it?"),
		})},
		MaxTokens: openai.Int(5), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Content != turns[0].Text {
		t.Fatalf("serve replied %+v, chat %q", got.Choices, turns[0].Text)
	}
	if got.Usage.PromptTokens != int64(len(rep.PromptIDs)) {
		t.Fatalf("serve counted %d prompt tokens, run %d", got.Usage.PromptTokens, len(rep.PromptIDs))
	}
}

// TestChatImageQwen2VLFolder: `chat` on a Qwen2-VL folder compiles it
// with the default image sizes, none of which holds a 1000x40 image: like
// `run --image`, chat then encodes it exactly with the folder's encoder
// (the interpreter's rows, not scaled down into a compiled size) and
// gives run's reply.
func TestChatImageQwen2VLFolder(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	t.Setenv(compile.CacheEnv, t.TempDir())
	tok := filepath.Join(dir, "text.gguf")
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(tpl, []byte(chatImageTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(t.TempDir(), "narrow.png")
	writePNG(t, wide, 1000, 40)
	vm, err := vlm.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	im, err := vision.DecodeFile(wide, vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := vm.Encode(im)
	if err != nil {
		t.Fatal(err)
	}
	turns, stderr := chatJSONTurns(t, "/image "+wide+"\nWhat is it?\n", "-m", dir, "--tokenizer", tok, "--chat-template", tpl,
		"--temp", "0", "-n", "4", "-t", "1")
	if len(turns) != 1 {
		t.Fatalf("%d turns, stderr %q", len(turns), stderr)
	}
	turn := turns[0]
	rows := 0
	for _, id := range turn.PromptIDs {
		if aotlm.IsEmbedID(id) {
			rows++
		}
	}
	if rows != enc.Rows*enc.Cols {
		t.Fatalf("%d image rows in the prompt, the folder's encoder gives %dx%d", rows, enc.Rows, enc.Cols)
	}
	rcode, rout, rerr := runCLI(t, "run", "-m", dir, "--tokenizer", tok, "--chat-template", tpl, "--chat", "--image", wide,
		"-p", "What is it?", "-n", "4", "--temp", "0", "--json", "-t", "1")
	if rcode != 0 {
		t.Fatalf("run: exit %d: %s", rcode, rerr)
	}
	var rep runJSON
	if err := json.Unmarshal([]byte(rout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.IDs) == 0 || !slices.Equal(rep.IDs, turn.IDs) {
		t.Fatalf("chat gave %v, run --image %v", turn.IDs, rep.IDs)
	}
}
