package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/testutil"
)

func TestServeFlags(t *testing.T) {
	for _, c := range []struct{ flag, says string }{
		{"--port=-2", "--port -2"}, {"--parallel=0", "--parallel 0"}, {"--queue=-5", "--queue -5"},
		{"--ctx=-1", "--ctx -1"}, {"--max-body=0", "--max-body 0"},
	} {
		code, _, stderr := runCLI(t, "serve", "-m", "nowhere.aot", c.flag)
		if code != 1 || !strings.Contains(stderr, c.says) {
			t.Errorf("%s: exit %d, %q", c.flag, code, stderr)
		}
	}
}

// lineWriter passes the command's stderr into a pipe the test reads.
type lineWriter struct {
	w *io.PipeWriter
}

func (l lineWriter) Write(p []byte) (int, error) { return l.w.Write(p) }

// TestServeCommand starts `aotlm serve` on a free port of loopback, asks
// /health and a completion, and stops it by cancelling its context.
func TestServeCommand(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	pr, pw := io.Pipe()
	root := newRoot(io.Discard, lineWriter{pw})
	root.SetArgs([]string{"serve", "-m", src, "--port", "0", "--ctx", "128", "--ar-len", "8", "-t", "1"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Setenv("AOTLM_CACHE", t.TempDir())
	go func() {
		done <- root.ExecuteContext(ctx)
		pw.Close()
	}()
	var url string
	sc := bufio.NewScanner(pr)
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
	for sc.Scan() {
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		cancel()
		t.Fatalf("serve printed no address: %v", <-done)
	}
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	resp, err = http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"model":"stories260K.gguf"`)) ||
		!bytes.Contains(body, []byte(`"text":", there was a little girl`)) {
		t.Fatalf("completion: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop 20s after its context was cancelled")
	}
}

// TestServeModelsDir serves a folder of two models in a budget that holds
// one: each answers under its file name, each load unloads the other, and
// requests from another site's page or under another host name are
// refused.
func TestServeModelsDir(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	for _, name := range []string{"a.gguf", "b.gguf"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pr, pw := io.Pipe()
	root := newRoot(io.Discard, lineWriter{pw})
	root.SetArgs([]string{"serve", "--models-dir", dir, "--max-memory", "2M", "--port", "0", "--ctx", "128", "--ar-len", "8", "-t", "1"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Setenv("AOTLM_CACHE", t.TempDir())
	go func() {
		done <- root.ExecuteContext(ctx)
		pw.Close()
	}()
	var url string
	sc := bufio.NewScanner(pr)
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
	for sc.Scan() {
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		cancel()
		t.Fatalf("serve printed no address: %v", <-done)
	}
	for _, model := range []string{"a.gguf", "b.gguf", "a.gguf"} {
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model": "`+model+`", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"model":"`+model+`"`)) ||
			!bytes.Contains(body, []byte(`"text":", there was a little girl`)) {
			t.Fatalf("completion of %s: %d %s", model, resp.StatusCode, body)
		}
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte("aotlm_model_loads_total 3\n")) || !bytes.Contains(metrics, []byte("aotlm_model_unloads_total 2\n")) {
		t.Errorf("metrics after a, b, a in a budget of one:\n%s", metrics)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(`{"prompt": "x"}`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site POST: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop 20s after its context was cancelled")
	}
}

// TestServeDraft: serve --draft lookup makes completions speculate by
// default (usage.speculative reports it), with --draft-max as the draft
// length; a --draft model that does not open is refused with its name.
func TestServeDraft(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	t.Setenv("AOTLM_CACHE", t.TempDir())
	url := startServe(t, "-m", src, "--ctx", "128", "--ar-len", "8", "-t", "1", "--draft", "lookup", "--draft-max", "4")
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": "Tom had a red ball. Tom had a red ball. Tom had", "max_tokens": 16, "temperature": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"speculative":{"type":"lookup"`)) {
		t.Fatalf("completion: %d %s", resp.StatusCode, body)
	}
	code, _, stderr := runCLI(t, "serve", "-m", src, "--port", "0", "--ctx", "128", "--ar-len", "8", "--draft", "nowhere.aot")
	if code != 1 || !strings.Contains(stderr, "draft model") || !strings.Contains(stderr, "nowhere.aot") {
		t.Errorf("a missing draft model: exit %d, %q", code, stderr)
	}
}
