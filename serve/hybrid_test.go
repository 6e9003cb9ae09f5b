package serve

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// openHybrid compiles the qwen35 family fixture (Gated DeltaNet layers
// with gated attention: a recurrent state beside the KV cache) with
// prefill passes of 8 and opens it with the ChatML template.
func openHybrid(t testing.TB) *aotlm.Model {
	t.Helper()
	src := testutil.Path(t, "arch/qwen35/model.gguf")
	path := filepath.Join(t.TempDir(), "qwen35.aot")
	if err := compile.CompileFile(src, path, compile.Options{ARLens: []int{8}, Ctx: 512}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(path, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetChatTemplate("chatml", chatML); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestHybridPrefixCache: on a hybrid model, a second turn extending the
// first restores the recurrent state kept at the end of the first
// prompt and prefills only the tokens after it (cached_tokens says how
// many it skipped), and its greedy reply equals the reply of a fresh
// session to the whole conversation.
func TestHybridPrefixCache(t *testing.T) {
	m := openHybrid(t)
	ts := newTestServerFor(t, m, Options{Parallel: 1})
	first, err := ts.client.Chat.Completions.New(context.Background(), userChat(6, nil))
	if err != nil {
		t.Fatal(err)
	}
	p := userChat(6, nil)
	p.Messages = append(p.Messages, openai.AssistantMessage(first.Choices[0].Message.Content), openai.UserMessage("Then what?"))
	second, err := ts.client.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	cached := second.Usage.PromptTokensDetails.CachedTokens
	if cached < first.Usage.PromptTokens || cached >= second.Usage.PromptTokens {
		t.Fatalf("second turn: %d of %d prompt tokens cached; the first turn's prompt had %d",
			cached, second.Usage.PromptTokens, first.Usage.PromptTokens)
	}
	msgs := []aotlm.Message{{Role: "user", Content: prompt}, {Role: "assistant", Content: first.Choices[0].Message.Content}, {Role: "user", Content: "Then what?"}}
	text, err := m.RenderChat(msgs, aotlm.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != int(second.Usage.PromptTokens) {
		t.Fatalf("the oracle's prompt has %d tokens, the server's %d: the test's messages differ from userChat's", len(ids), second.Usage.PromptTokens)
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, MaxTokens: 6, StopIDs: m.EndOfTurnIDs()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Choices[0].Message.Content; got != want.Text {
		t.Fatalf("second turn from the restored state: %q; a fresh session: %q", got, want.Text)
	}
}

// TestHybridMemoryFlat: 1,000 requests on a hybrid model, two at a time
// and many sharing a prefix with an earlier one, leave the resident
// memory where it was after the first 300 (within 5%). The fixture's
// weights are tiny, so the process's resident memory (about 40 MiB) is
// mostly the server's own, whose bounded caches fill over the first few
// hundred requests (about 3 MiB of heap): the baseline is taken after
// them, where a leak of a state set, a session or a buffer per request
// would show.
func TestHybridMemoryFlat(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "android" {
		t.Skip("resident memory is read from /proc/self/statm")
	}
	ts := newTestServerFor(t, openHybrid(t), Options{Parallel: 2, Queue: 4})
	client := &http.Client{}
	request := func(i int) error {
		body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "story %d of %d"}], "max_tokens": 4}`, i%7, i%13)
		resp, err := client.Post(ts.http.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("request %d: status %d", i, resp.StatusCode)
		}
		return nil
	}
	run := func(from, to int) {
		errs := make(chan error, 2)
		for w := range 2 {
			go func() {
				for i := from + w; i < to; i += 2 {
					if err := request(i); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	run(0, 300)
	base := residentBytes(t)
	run(300, 1300)
	after := residentBytes(t)
	t.Logf("resident memory: %d KiB after 300 requests, %d KiB after 1,000 more", base>>10, after>>10)
	if float64(after) > 1.05*float64(base) {
		t.Fatalf("resident memory grew from %d to %d bytes over 1,000 requests (> 5%%)", base, after)
	}
}

// residentBytes reads the process's resident set size.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	debug.FreeOSMemory() // a collection, and the freed heap returned, so the figure is the live memory
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}
