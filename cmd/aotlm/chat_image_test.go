package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vlm"
)

// chatImageTemplate is a plain chat template for the tiny SmolVLM
// fixture, which has none.
const chatImageTemplate = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"

// chatJSONTurns runs `chat --json` with args on the script as its input
// and returns its turns and stderr.
func chatJSONTurns(t *testing.T, script string, args ...string) ([]chatTurn, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runWithInput(append(append([]string{"chat"}, args...), "--json"), strings.NewReader(script), &out, &errb)
	if code != 0 {
		t.Fatalf("chat: exit %d: %s", code, errb.String())
	}
	var turns []chatTurn
	for dec := json.NewDecoder(&out); dec.More(); {
		var tr chatTurn
		if err := dec.Decode(&tr); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tr)
	}
	return turns, errb.String()
}

// TestChatImage: `chat` with /image on the tiny SmolVLM fixture. The first
// turn's reply is the one `run --image --chat` gives for the same message;
// the second turn, with another image placed by its <image> marker, reuses
// the cache past the first image and gives what a fresh session gives for
// the whole conversation.
func TestChatImage(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	t.Setenv(compile.CacheEnv, t.TempDir())
	tok := filepath.Join(dir, "text.gguf")
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(tpl, []byte(chatImageTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	wide, square := filepath.Join(dir, "image_wide.png"), filepath.Join(dir, "image_square.png")
	script := "/image " + wide + "\nWhat is it?\n/image " + square + "\nAnd <image> this?\n"
	turns, stderr := chatJSONTurns(t, script, "-m", dir, "--tokenizer", tok, "--chat-template", tpl, "--temp", "0", "-n", "4", "-t", "1")
	if len(turns) != 2 || strings.Count(stderr, "image attached") != 2 {
		t.Fatalf("%d turns, stderr %q", len(turns), stderr)
	}
	embedIDs := func(ids []int) []int {
		var e []int
		for _, id := range ids {
			if aotlm.IsEmbedID(id) {
				e = append(e, id)
			}
		}
		return e
	}
	// one 1x1-grid slice and the overview: 32 rows per image
	first, both := embedIDs(turns[0].PromptIDs), embedIDs(turns[1].PromptIDs)
	if len(first) != 32 || len(both) != 64 || !slices.Equal(both[:32], first) || slices.Contains(first, both[32]) {
		t.Fatalf("embedding ids: turn 1 %d, turn 2 %d (the first image's must come again, the second's differ)", len(first), len(both))
	}

	// turn 1 = run --image --chat
	rcode, rout, rerr := runCLI(t, "run", "-m", dir, "--tokenizer", tok, "--chat-template", tpl, "--chat", "--image", wide,
		"-p", "What is it?", "-n", "4", "--temp", "0", "--json", "-t", "1")
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
	if len(rep.PromptIDs) != len(turns[0].PromptIDs) {
		t.Fatalf("turn 1 prompt of %d ids, run's %d", len(turns[0].PromptIDs), len(rep.PromptIDs))
	}

	// turn 2 reused the first turn's cache, image included, and equals a
	// fresh session over the whole conversation
	if turns[1].Reused < len(turns[0].PromptIDs) {
		t.Fatalf("turn 2 reused %d ids, the first turn's prompt has %d", turns[1].Reused, len(turns[0].PromptIDs))
	}
	arts, _ := filepath.Glob(filepath.Join(os.Getenv(compile.CacheEnv), "*.aot"))
	if len(arts) != 1 {
		t.Fatalf("cache holds %v", arts)
	}
	m, err := aotlm.Open(arts[0], aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	vm, err := vlm.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	images := vlm.NewPrompter(vm, vm.TextConfig().Hidden, m).NewImages()
	var ph []string
	for _, f := range []string{wide, square} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := images.Add(data)
		if err != nil {
			t.Fatal(err)
		}
		ph = append(ph, p)
	}
	tmpl, err := chat.Load(tpl)
	if err != nil {
		t.Fatal(err)
	}
	text, err := tmpl.Render([]chat.Message{{Role: "user", Content: ph[0] + "What is it?"},
		{Role: "assistant", Content: turns[0].Text}, {Role: "user", Content: "And " + ph[1] + " this?"}},
		chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := images.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, turns[1].PromptIDs) {
		t.Fatalf("turn 2 prompt %v, the rendered conversation %v", turns[1].PromptIDs, ids)
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, Raw: true, MaxTokens: 4, Embeds: images.Embeds(),
		StopIDs: m.EndOfTurnIDs()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(want.IDs, turns[1].IDs) {
		t.Fatalf("turn 2 gave %v, a fresh session %v", turns[1].IDs, want.IDs)
	}
}

// TestChatImageErrors: /image on a model without vision, a file that is
// not an image and a marker count that does not match are noted, and the
// chat goes on.
func TestChatImageErrors(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	t.Setenv(compile.CacheEnv, t.TempDir())
	tok := filepath.Join(dir, "text.gguf")
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	bad := filepath.Join(t.TempDir(), "bad.png")
	for f, b := range map[string]string{tpl: chatImageTemplate, bad: "not a picture"} {
		if err := os.WriteFile(f, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "image_square.png")
	for _, c := range []struct {
		args   []string
		script string
		want   []string
		turns  int
	}{
		{[]string{"-m", tok}, "/image " + img + "\nhi\n", []string{"needs a vision-language model"}, 1},
		{[]string{"-m", dir, "--tokenizer", tok}, "/image " + bad + "\n/image\n/image " + img + "\n<image> and <image>\nhi\n",
			[]string{"not an image", "name an image file", "2 <image> markers for 1 images"}, 1},
	} {
		var out, errb bytes.Buffer
		code := runWithInput(append(append([]string{"chat"}, c.args...), "--chat-template", tpl, "--temp", "0", "-n", "2",
			"--json", "-t", "1"), strings.NewReader(c.script), &out, &errb)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errb.String())
		}
		for _, w := range c.want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errb.String(), w)
			}
		}
		if n := strings.Count(out.String(), "\"turn\""); n != c.turns {
			t.Errorf("%v: %d turns, want %d", c.args, n, c.turns)
		}
	}
}
