package mobile

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/aotlm/aotlm"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

const chatML = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

type collect struct {
	parts []string
	limit int
}

func (c *collect) OnToken(text string) bool {
	c.parts = append(c.parts, text)
	return c.limit == 0 || len(c.parts) < c.limit
}

// TestChat runs two greedy turns through the bound API: the streamed
// pieces add up to the reply, a handler can stop it, and the model info
// is JSON.
func TestChat(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	path := filepath.Join(t.TempDir(), "stories.aot")
	if err := compile.CompileFile(src, path, compile.Options{ARLens: []int{8}, Ctx: 256}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(m.InfoJSON(), `"Context":256`) {
		t.Fatalf("info %s", m.InfoJSON())
	}
	if err := m.SetChatTemplate(chatML); err != nil {
		t.Fatal(err)
	}
	c, err := m.NewChat("You tell stories.")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Temperature = 0
	var h collect
	reply, err := c.Send("Once upon a time", 16, &h)
	if err != nil {
		t.Fatal(err)
	}
	if reply == "" || strings.Join(h.parts, "") != reply {
		t.Fatalf("reply %q, streamed %q", reply, h.parts)
	}
	stop := collect{limit: 3}
	reply2, err := c.Send("And then?", 32, &stop)
	if err != nil {
		t.Fatal(err)
	}
	if len(stop.parts) != 3 || strings.Join(stop.parts, "") != reply2 {
		t.Fatalf("a handler that stops after 3 pieces got %q, reply %q", stop.parts, reply2)
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := Open(filepath.Join(os.TempDir(), "no-such-model.aot"), 1, 0); err == nil {
		t.Fatal("opening a missing file succeeded")
	}
}

// TestServer starts the in-app server on a model, answers a completion
// over HTTP with the same greedy text as a chat-free session, and stops.
func TestServer(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	path := filepath.Join(t.TempDir(), "stories.aot")
	if err := compile.CompileFile(src, path, compile.Options{ARLens: []int{8}, Ctx: 256}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.StartServer("", 70000, 1, ""); err == nil {
		t.Fatal("port 70000 was taken")
	}
	srv, err := m.StartServer("", 0, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", srv.URL())
	}
	body := `{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}`
	resp, err := http.Post(srv.URL()+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
		t.Fatalf("status %d, %v, %+v", resp.StatusCode, err, out)
	}
	s, err := m.m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 16}, nil)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out.Choices[0].Text != want.Text {
		t.Fatalf("served %q, the session generates %q", out.Choices[0].Text, want.Text)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := http.Get(srv.URL() + "/health"); err == nil {
		t.Fatal("the server still answers after Stop")
	}
}
