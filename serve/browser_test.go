package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aotlm/aotlm/internal/testutil"
)

// chromiumPath finds a Chromium binary (Debian's chromium package); the
// test fails without one under CI=true (scripts/test.sh installs it).
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testutil.InCI() {
		t.Fatal("no chromium binary (CI=true, so this is a failure): apt-get install chromium")
	}
	t.Skip("no chromium binary: apt-get install chromium to run the web chat test")
	return ""
}

// TestWebChat drives the page at / in headless Chromium: it shows the
// model's name and context, a typed message gets a reply that arrives in
// several steps (streamed), and a screenshot is saved.
func TestWebChat(t *testing.T) {
	bin := chromiumPath(t)
	ts := newTestServer(t, Options{Parallel: 1})
	// stories260K writes its whole reply in a few milliseconds: the
	// browser could read it in one or two network reads and render it in
	// as many steps. The page is served through pacedWrites, which spaces
	// the writes of a response 5 ms apart as a real model's tokens are,
	// so that the test sees whether the page renders a stream as it comes.
	paced := httptest.NewServer(pacedWrites(ts.srv.Handler(), 5*time.Millisecond))
	defer paced.Close()
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1000, 700),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	// the first call starts the browser and must not carry a timeout
	if err := chromedp.Do(bctx, chromedp.Navigate(paced.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("page", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("input"))))
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("model-name").textContent !== "…"`))
	must("model info", err)
	name, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("model-name")))
	must("model name", err)
	ctxSize, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("model-ctx")))
	must("model context", err)
	if name != "stories" || ctxSize != "256" {
		t.Fatalf("the page shows model %q with context %q, want stories and 256", name, ctxSize)
	}
	// record the lengths of the reply as it grows
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.lengths = new Set();
		new MutationObserver(() => { const a = document.querySelector(".assistant");
			if (a && a.textContent.length > 0) window.lengths.add(a.textContent.length); })
			.observe(document.getElementById("messages"), {subtree: true, childList: true, characterData: true}); true`))
	must("observer", err)
	must("typing", chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("system"), "You tell stories."),
		chromedp.SetValue(chromedp.ID("max-tokens"), "128"),
		chromedp.SendKeys(chromedp.ID("input"), "Once upon a time"),
		chromedp.Click(chromedp.ID("send")),
	))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const a = document.querySelector(".assistant");
		return a !== null && a.textContent.length > 0 && !document.getElementById("send").disabled; })()`))
	must("waiting for the reply", err)
	reply, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".assistant")))
	must("reply", err)
	toks, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("toks")))
	must("tok/s", err)
	updates, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.lengths.size`))
	must("updates", err)
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	must("screenshot", err)
	if strings.TrimSpace(reply) == "" || updates < 3 {
		t.Fatalf("reply %q shown at %d lengths: want text that grows as it streams", reply, updates)
	}
	if !strings.HasSuffix(toks, "tok/s") {
		t.Fatalf("tokens per second shows %q", toks)
	}
	dir := os.Getenv("AOTLM_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "webchat.png")
	if len(shot) < 1000 || string(shot[1:4]) != "PNG" {
		t.Fatalf("screenshot of %d bytes is not a PNG", len(shot))
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("reply %q shown at %d lengths, %s; screenshot %s", reply, updates, toks, path)
}

// pacedWrites serves h, waiting gap before each write of a response after
// its first, and flushing after each (an SSE stream's events then reach
// the client spread in time, as a slower model's would).
func pacedWrites(h http.Handler, gap time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&pacedWriter{ResponseWriter: w, gap: gap}, r)
	})
}

// pacedWriter is the ResponseWriter of pacedWrites.
type pacedWriter struct {
	http.ResponseWriter
	gap    time.Duration
	writes int
}

func (p *pacedWriter) Write(b []byte) (int, error) {
	if p.writes > 0 {
		time.Sleep(p.gap)
	}
	p.writes++
	n, err := p.ResponseWriter.Write(b)
	p.Flush()
	return n, err
}

// Unwrap gives http.ResponseController the server's writer.
func (p *pacedWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Flush passes a flush on to the server's writer.
func (p *pacedWriter) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
