package aotlm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestMain runs the examples only where the shared test data is; under
// CI=true its absence is a failure.
func TestMain(m *testing.M) {
	if _, err := os.Stat(filepath.Join(testutil.Dir(), "models/stories260K/stories260K.gguf")); err != nil {
		if testutil.InCI() {
			fmt.Fprintln(os.Stderr, "test data missing (CI=true, so this is a failure):", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "skipping the examples: no test data:", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// storiesArtifact compiles the stories260K test model (context 256) into
// a temporary folder, as `aotlm compile stories260K.gguf -o
// stories.aot --ctx 256` does; the examples open it.
func storiesArtifact() string {
	dir, err := os.MkdirTemp("", "aotlm-example")
	if err != nil {
		panic(err)
	}
	out := filepath.Join(dir, "stories.aot")
	src := filepath.Join(testutil.Dir(), "models/stories260K/stories260K.gguf")
	if err := compile.CompileFile(src, out, compile.Options{ARLens: []int{8}, Ctx: 256}); err != nil {
		panic(err)
	}
	return out
}

// Open maps an artifact; Info tells what it holds.
func ExampleOpen() {
	path := storiesArtifact()
	defer os.RemoveAll(filepath.Dir(path))
	m, err := aotlm.Open(path, aotlm.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	info := m.Info()
	fmt.Println(info.Architecture, info.Vocab, info.Context, info.KVCache)
	// Output: llama 512 256 f32
}

// Generate streams a continuation token by token; a greedy one
// (temperature 0) is the same every time.
func ExampleSession_Generate() {
	path := storiesArtifact()
	defer os.RemoveAll(filepath.Dir(path))
	m, err := aotlm.Open(path, aotlm.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	s, err := m.NewSession(0)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	var streamed strings.Builder
	res, err := s.Generate(context.Background(), aotlm.Request{
		Prompt:    "Once upon a time",
		MaxTokens: 12,
		Sampling:  aotlm.Sampling{Temperature: 0},
	}, func(t aotlm.Token) error {
		streamed.WriteString(t.Text)
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", res.Text)
	fmt.Println(streamed.String() == res.Text, res.StopReason)
	// A second call whose prompt extends the first reuses its cache.
	res2, err := s.Generate(context.Background(), aotlm.Request{
		Prompt: "Once upon a time" + res.Text, MaxTokens: 4,
	}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res2.Reused > len(res.PromptIDs))
	// Output:
	// ", there was a little girl named Lily. She"
	// true length
	// true
}

// A Chat keeps the conversation and its cache across turns.
func ExampleModel_NewChat() {
	path := storiesArtifact()
	defer os.RemoveAll(filepath.Dir(path))
	m, err := aotlm.Open(path, aotlm.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	// stories260K has no chat template of its own: give it ChatML
	err = m.SetChatTemplate("chatml", `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`)
	if err != nil {
		panic(err)
	}
	c, err := m.NewChat(aotlm.ChatOptions{System: "You tell stories."})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	req := aotlm.Request{MaxTokens: 8}
	first, err := c.Send(context.Background(), "Tell me a story.", req, nil)
	if err != nil {
		panic(err)
	}
	second, err := c.Send(context.Background(), "And then?", req, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(c.Messages()), first.Reused, second.Reused >= len(first.PromptIDs))
	// Output: 4 0 true
}
