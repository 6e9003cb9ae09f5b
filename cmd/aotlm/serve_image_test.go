package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// startServe runs `aotlm serve` with args on a free loopback port and
// returns its URL; the server stops when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	pr, pw := io.Pipe()
	root := newRoot(io.Discard, lineWriter{pw})
	root.SetArgs(append([]string{"serve", "--port", "0"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- root.ExecuteContext(ctx)
		pw.Close()
	}()
	var url string
	var log strings.Builder
	sc := bufio.NewScanner(pr)
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		cancel()
		t.Fatalf("serve printed no address: %v\n%s", <-done, log.String())
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	})
	return url
}

// TestServeImage: an OpenAI chat completion (the official client) with an
// image_url part holding a data: URL, on the tiny SmolVLM fixture, gives
// the greedy reply `run --image --chat` gives for the same image and
// text; the same image as a file path (the server allows them here) gives
// it too, and bad images are refused with 400s that say why.
func TestServeImage(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	t.Setenv(compile.CacheEnv, t.TempDir())
	tok := filepath.Join(dir, "text.gguf")
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(tpl, []byte(chatImageTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "image_wide.png")
	data, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	rcode, rout, rerr := runCLI(t, "run", "-m", dir, "--tokenizer", tok, "--chat-template", tpl, "--chat", "--image", img,
		"-p", "What is it?", "-n", "5", "--temp", "0", "--json", "-t", "1")
	if rcode != 0 {
		t.Fatalf("run: exit %d: %s", rcode, rerr)
	}
	var want runJSON
	if err := json.Unmarshal([]byte(rout), &want); err != nil {
		t.Fatal(err)
	}

	url := startServe(t, "-m", dir, "--tokenizer", tok, "--chat-template", tpl, "-t", "1", "--ctx", "256", "--allow-local-images")
	client := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	ask := func(u string) (*openai.ChatCompletion, error) {
		return client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: u}),
				openai.TextContentPart("What is it?"),
			})},
			MaxTokens: openai.Int(5), Temperature: openai.Float(0),
		})
	}
	for _, u := range []string{"data:image/png;base64," + base64.StdEncoding.EncodeToString(data), img, "file://" + img} {
		got, err := ask(u)
		if err != nil {
			t.Fatalf("%.40s: %v", u, err)
		}
		if len(got.Choices) != 1 || want.Text == "" || got.Choices[0].Message.Content != want.Text {
			t.Fatalf("%.40s: reply %+v, run --image %q", u, got.Choices, want.Text)
		}
		if got.Usage.PromptTokens != int64(len(want.PromptIDs)) {
			t.Fatalf("%.40s: %d prompt tokens, run's %d", u, got.Usage.PromptTokens, len(want.PromptIDs))
		}
	}

	for _, c := range []struct{ url, want string }{
		{"data:image/png;base64,!!!notbase64", "base64 is malformed"},
		{"data:text/plain;base64,aGVsbG8=", "not an image type"},
		{"data:image/png;base64,aGVsbG8=", "not an image"},
		{"data:image/png,rawdata", "not base64"},
		{"https://example.com/cat.png", "does not fetch images"},
		{filepath.Join(dir, "missing.png"), "missing.png"},
	} {
		_, err := ask(c.url)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, c.want) {
			t.Errorf("%.40s: %v, want a 400 saying %q", c.url, err, c.want)
		}
	}
}

// TestServeImageRefusals: a server not started with --allow-local-images
// refuses file paths, and one serving a model without vision refuses
// image parts.
func TestServeImageRefusals(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	t.Setenv(compile.CacheEnv, t.TempDir())
	tok := filepath.Join(dir, "text.gguf")
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(tpl, []byte(chatImageTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "image_square.png")
	for _, c := range []struct {
		args       []string
		url, wants string
	}{
		{[]string{"-m", dir, "--tokenizer", tok}, img, "not allowed on this server"},
		{[]string{"-m", tok}, "data:image/png;base64,aGVsbG8=", "reads no images"},
	} {
		url := startServe(t, append(c.args, "--chat-template", tpl, "-t", "1", "--ctx", "256")...)
		body := `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ` + jsonString(c.url) + `}}, {"type": "text", "text": "hi"}]}], "max_tokens": 2}`
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.wants) {
			t.Errorf("%v: %d %s, want a 400 saying %q", c.args, resp.StatusCode, b, c.wants)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
