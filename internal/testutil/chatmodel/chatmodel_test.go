package chatmodel

import (
	"slices"
	"testing"
	"time"

	"github.com/aotlm/aotlm"
)

// TestQwen3: the built model opens with a 4,096-token context, the Qwen3
// template and tokenizer (the special tokens encode to their ids), and
// the template renders the empty think block when thinking is off.
func TestQwen3(t *testing.T) {
	start := time.Now()
	path := Qwen3(t, t.TempDir())
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	m, err := aotlm.Open(path, aotlm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Info().Context; got != Qwen3Ctx {
		t.Errorf("context %d, want %d", got, Qwen3Ctx)
	}
	ids, err := m.Encode("<|im_start|>user\nhi<|im_end|><think></think>", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{Qwen3ImStart, 872, 198, 6023, Qwen3ImEnd, Qwen3ThinkOpen, Qwen3ThinkEnd}
	if len(ids) != len(want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	for i := range ids {
		if ids[i] != want[i] {
			t.Fatalf("ids %v, want %v", ids, want)
		}
	}
	text, err := m.RenderChat([]aotlm.Message{{Role: "user", Content: "hi"}},
		aotlm.RenderOptions{Vars: map[string]any{"enable_thinking": false}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; text != want {
		t.Errorf("rendered %q, want %q", text, want)
	}
	var eot []string
	for _, id := range m.EndOfTurnIDs() {
		eot = append(eot, m.Tokenizer().Token(id))
	}
	if !slices.Contains(eot, "<|im_end|>") {
		t.Errorf("end-of-turn tokens %q do not hold <|im_end|>", eot)
	}
}
