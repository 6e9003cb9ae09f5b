package hub

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/hf/hub/hubtest"
)

// thief is a server that records the tokens it is sent and answers an
// empty file list page.
func thief(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var got atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			got.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("[]"))
	}))
	t.Cleanup(s.Close)
	return s, &got
}

// TestTokenOnlyToTheEndpoint: with a token, a pull sends it to the Hub
// endpoint only: not to the file host that LFS files redirect to (another
// port of the same machine: a different origin), and a file list page
// linking its next page to another host (another port, another scheme, a
// host that shares the name) is refused without a request to it.
func TestTokenOnlyToTheEndpoint(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	files := checkpointRepo()
	repo := hub.AddRepo("test-org/private", files)
	repo.Gated, repo.Granted["tok"] = true, true
	withToken := func(o *Options) { o.Token = "tok" }
	res, err := pull(t, newClient(t, hub, t.TempDir(), withToken), "test-org/private")
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, res, map[string][]byte{"model.safetensors": files["model.safetensors"]})
	if hub.Tokens("hub") == 0 || hub.Tokens("cdn") != 0 {
		t.Errorf("tokens: %d to the Hub, %d to the file host (want >0, 0)", hub.Tokens("hub"), hub.Tokens("cdn"))
	}
	evil, stolen := thief(t)
	hub.PageSize = 2
	for _, target := range []func(self, next string) string{
		func(_, next string) string { return strings.Replace(next, hub.URL(), evil.URL, 1) },
		func(_, next string) string { return strings.Replace(next, hub.URL(), hub.CDN.URL, 1) },
		func(_, next string) string { return strings.Replace(next, "http://", "https://", 1) },
		func(_, next string) string { return strings.Replace(next, "127.0.0.1", "localhost", 1) },
		func(_, next string) string { return strings.Replace(next, hub.URL(), "//evil.invalid", 1) },
	} {
		hub.NextLink = func(self, next string) string {
			if next == "" {
				return ""
			}
			return target(self, next)
		}
		_, err := pull(t, newClient(t, hub, t.TempDir(), withToken), "test-org/private")
		if err == nil || !strings.Contains(err.Error(), "another host") {
			t.Errorf("next page %s: %v", target("", hub.URL()+"/x"), err)
		}
	}
	if stolen.Load() != 0 {
		t.Errorf("the other host got the token %d times", stolen.Load())
	}
}

// TestPaginationLoops: a file list page that links to itself, two pages
// that link to each other, and an empty page that links on are errors,
// after a bounded number of requests.
func TestPaginationLoops(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	hub.AddRepo("test-org/m", checkpointRepo())
	hub.PageSize = 3
	var first string
	for name, link := range map[string]func(self, next string) string{
		"self": func(self, _ string) string { return self },
		"ping-pong": func(self, next string) string {
			if first == "" {
				first = self
			}
			if next == "" || strings.Contains(self, "cursor=3") {
				return first
			}
			return next
		},
		"back to the start": func(self, next string) string {
			if next == "" {
				return strings.Split(self, "?")[0] + "?recursive=true"
			}
			return next
		},
		"empty pages": func(self, next string) string {
			return strings.Split(self, "?")[0] + "?recursive=true&cursor=1000&n=" + time.Now().Format("150405.000000000")
		},
	} {
		first = ""
		hub.NextLink = link
		_, err := pull(t, newClient(t, hub, t.TempDir()), "test-org/m")
		if err == nil || !(strings.Contains(err.Error(), "loops") || strings.Contains(err.Error(), "empty page")) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStalledBodies: a file body, or a file list page, that stops coming
// while the connection stays open fails after the read timeout with an
// error saying so; a slow body that keeps coming does not.
func TestStalledBodies(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	files := checkpointRepo()
	hub.AddRepo("test-org/m", files)
	short := func(o *Options) { o.ReadTimeout = 300 * time.Millisecond }
	for _, c := range []struct {
		path string
		n    int64
	}{
		{"model.safetensors", 0},
		{"model.safetensors", 4096},
		{"model.safetensors", int64(len(files["model.safetensors"]) - 1)},
		{"config.json", 3},
		{"", 0},
		{"", 5},
	} {
		hub.StallNext(c.path, c.n)
		start := time.Now()
		_, err := pull(t, newClient(t, hub, t.TempDir(), short), "test-org/m")
		if !errors.Is(err, ErrStalled) {
			t.Errorf("stall of %q after %d bytes: %v", c.path, c.n, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("stall of %q after %d bytes: failed after %v", c.path, c.n, d)
		}
	}
	hub.Delay = 50 * time.Millisecond // each write slower than... nothing: well under the timeout
	if _, err := pull(t, newClient(t, hub, t.TempDir(), short), "test-org/m"); err != nil {
		t.Errorf("a slow but steady pull: %v", err)
	}
}

// TestServerNamesAreEscaped: a Hub error message with terminal escapes
// comes back escaped.
func TestServerNamesAreEscaped(t *testing.T) {
	c, _ := New(Options{Endpoint: DefaultEndpoint, CacheDir: t.TempDir()})
	resp := &http.Response{StatusCode: http.StatusTeapot, Status: "418 \x1b[2J",
		Header: http.Header{"X-Error-Message": {"gone\x1b]0;owned\x07\u202e"}}}
	err := c.statusError(resp, "org/x", "")
	if strings.ContainsAny(err.Error(), "\x1b\x07\u202e") || !strings.Contains(err.Error(), `\x1b`) {
		t.Errorf("%q", err)
	}
}

// TestDownloadTimeoutFromEnv: HF_HUB_DOWNLOAD_TIMEOUT sets the read
// timeout in seconds; a value that is not a positive number is refused.
func TestDownloadTimeoutFromEnv(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	for v, want := range map[string]time.Duration{"2.5": 2500 * time.Millisecond, "30": 30 * time.Second} {
		t.Setenv("HF_HUB_DOWNLOAD_TIMEOUT", v)
		if o, err := FromEnv(); err != nil || o.ReadTimeout != want {
			t.Errorf("%s: %v %v", v, o.ReadTimeout, err)
		}
	}
	for _, v := range []string{"0", "-1", "x", "NaN", "Inf"} {
		t.Setenv("HF_HUB_DOWNLOAD_TIMEOUT", v)
		if _, err := FromEnv(); err == nil {
			t.Errorf("%s accepted", v)
		}
	}
}

// TestPipesInTheCacheDoNotBlock: a named pipe as the token file or as a
// cache's refs/main is not read (it would block): FromEnv and List return
// at once.
func TestPipesInTheCacheDoNotBlock(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := syscall.Mkfifo(tok, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", tok)
	t.Setenv("HF_HUB_CACHE", dir)
	refs := filepath.Join(dir, "models--org--name", "refs")
	os.MkdirAll(refs, 0o755)
	os.MkdirAll(filepath.Join(dir, "models--org--name", "snapshots"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(refs, "main"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		o, err := FromEnv()
		if err == nil && o.Token != "" {
			err = errors.New("a token was read from a pipe")
		}
		if err == nil {
			_, err = List(dir)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("blocked on a named pipe")
	}
}
