package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// recordChats serves h and keeps the body of each chat request.
type recordChats struct {
	h      http.Handler
	mu     sync.Mutex
	bodies []string
}

func (rc *recordChats) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/chat/completions" {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		rc.mu.Lock()
		rc.bodies = append(rc.bodies, string(b))
		rc.mu.Unlock()
	}
	rc.h.ServeHTTP(w, r)
}

func (rc *recordChats) last() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) == 0 {
		return ""
	}
	return rc.bodies[len(rc.bodies)-1]
}

// browser starts headless Chromium with a window of w x h (phone: mobile
// emulation with touch) and opens url.
func browser(t *testing.T, url string, w, h int64, phone bool) context.Context {
	t.Helper()
	bin := chromiumPath(t)
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
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(w), int(h)),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	view := []chromedp.EmulateViewportOption{}
	if phone {
		view = append(view, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait, chromedp.EmulateScale(3))
	}
	// the first call starts the browser and must not carry a timeout
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(w, h, view...), chromedp.Navigate(url)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// layout is what the page looks like at one moment.
type layout struct {
	Viewport    float64 `json:"viewport"`
	ScrollWidth float64 `json:"scrollWidth"`
	Input       float64 `json:"input"`
	SendShown   bool    `json:"sendShown"`
	StopShown   bool    `json:"stopShown"`
	AsideShown  bool    `json:"asideShown"`
}

// layoutJS measures the page: an element is shown when it lies inside the
// viewport and is the one found at its own center (nothing covers it).
const layoutJS = `(() => {
	const shown = (el) => { const r = el.getBoundingClientRect();
		if (r.width === 0 || r.height === 0 || r.left < 0 || r.top < 0 || r.right > innerWidth || r.bottom > innerHeight) return false;
		const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		return at === el || el.contains(at); };
	return { viewport: document.documentElement.clientWidth,
		scrollWidth: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
		input: document.getElementById("input").getBoundingClientRect().width,
		sendShown: shown(document.getElementById("send")), stopShown: shown(document.getElementById("stop")),
		asideShown: shown(document.getElementById("system")) };
})()`

// TestWebChatSizes drives the web chat in headless Chromium at a desktop
// size and at a phone's 390x844: the message input is at least 300 px
// wide, the page does not scroll sideways, Send and Stop are on screen;
// on the phone the settings open as a drawer. A turn that fails is
// marked and left out of the history, so the next message succeeds; a
// reply cut by max tokens says so; tok/s comes from the server's
// timings; an attached image is sent as an image_url part; reasoning is
// collapsed and markdown rendered. Screenshots are saved (to
// AOTLM_SCREENSHOT_DIR when set).
func TestWebChatSizes(t *testing.T) {
	for _, size := range []struct {
		name  string
		w, h  int64
		phone bool
	}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}} {
		t.Run(size.name, func(t *testing.T) {
			ts := newTestServer(t, Options{Parallel: 1})
			rec := &recordChats{h: ts.srv.Handler()}
			hs := httptest.NewServer(rec)
			defer hs.Close()
			ctx := browser(t, hs.URL+"/", size.w, size.h, size.phone)
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			measure := func(when string) layout {
				t.Helper()
				l, err := chromedp.Run(ctx, chromedp.Evaluate[layout](layoutJS))
				must("measuring "+when, err)
				if l.Input < 300 || l.ScrollWidth > l.Viewport || !l.SendShown || !l.StopShown {
					t.Errorf("%s: input %.0f px wide, page %.0f px in a viewport of %.0f, Send shown %v, Stop shown %v",
						when, l.Input, l.ScrollWidth, l.Viewport, l.SendShown, l.StopShown)
				}
				return l
			}
			shot := func(name string) {
				t.Helper()
				b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
				must("screenshot", err)
				dir := os.Getenv("AOTLM_SCREENSHOT_DIR")
				if dir == "" {
					dir = t.TempDir()
				}
				p := filepath.Join(dir, "webchat-"+size.name+"-"+name+".png")
				must("saving the screenshot", os.WriteFile(p, b, 0o644))
				t.Logf("screenshot %s", p)
			}
			must("page", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("input"))))
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("model-name").textContent === "stories"`))
			must("model info", err)
			l := measure("at load")
			if size.phone {
				if l.AsideShown {
					t.Errorf("on a phone the settings are shown at load; want them in a drawer")
				}
				must("opening the drawer", chromedp.Do(ctx, chromedp.Click(chromedp.ID("settings-toggle"))))
				_, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const r = document.getElementById("settings").getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth; })()`))
				must("drawer", err)
				shot("drawer")
				must("closing the drawer", chromedp.Do(ctx, chromedp.Click(chromedp.ID("settings-close"))))
			} else if !l.AsideShown {
				t.Errorf("on a desktop the settings are not shown")
			}
			// a turn the server refuses (max_tokens beyond the context)
			must("failing turn", chromedp.Do(ctx,
				chromedp.SetValue(chromedp.ID("max-tokens"), "100000"),
				chromedp.SetValue(chromedp.ID("temperature"), "0"),
				chromedp.SetValue(chromedp.ID("input"), "first message"),
				chromedp.Click(chromedp.ID("send")),
			))
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll(".assistant.failed").length === 1 && !document.getElementById("send").disabled`))
			must("waiting for the failure", err)
			failNote, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".assistant.failed .note")))
			must("failure note", err)
			if !strings.Contains(failNote, "Failed") || !strings.Contains(failNote, "max_tokens") {
				t.Errorf("the failed turn says %q", failNote)
			}
			if l := measure("after a failed turn"); size.phone && l.AsideShown {
				t.Errorf("the drawer stayed open over the chat after sending")
			}
			// the next message succeeds, cut by max tokens
			must("second turn", chromedp.Do(ctx,
				chromedp.SetValue(chromedp.ID("max-tokens"), "12"),
				chromedp.SetValue(chromedp.ID("input"), "Once upon a time"),
				chromedp.Click(chromedp.ID("send")),
			))
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll(".assistant").length === 2 && !document.getElementById("send").disabled`))
			must("waiting for the reply", err)
			var body struct {
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			must("request body", json.Unmarshal([]byte(rec.last()), &body))
			if len(body.Messages) != 1 || !strings.Contains(string(body.Messages[0].Content), "Once upon a time") {
				t.Errorf("the message after a failed turn sent %s; want only itself (the failed turn left out)", rec.last())
			}
			type reply struct {
				Text, Note string
				Failed     bool
				Toks       string
				Rate       float64
			}
			r, err := chromedp.Run(ctx, chromedp.Evaluate[reply](`(() => { const a = document.querySelectorAll(".assistant")[1];
				const n = a.querySelector(".note");
				return { Text: a.querySelector(".body").textContent, Note: n ? n.textContent : "", Failed: a.classList.contains("failed"),
					Toks: document.getElementById("toks").textContent, Rate: window.lastTimings ? window.lastTimings.predicted_per_second : 0 }; })()`))
			must("reply", err)
			if r.Failed || strings.TrimSpace(r.Text) == "" {
				t.Fatalf("the message after a failed turn: reply %q, failed %v", r.Text, r.Failed)
			}
			if !strings.Contains(r.Note, "max tokens") {
				t.Errorf("a reply cut at 12 tokens says %q; want a note about max tokens", r.Note)
			}
			if r.Rate <= 0 || r.Toks != fmt.Sprintf("%.1f tok/s", r.Rate) {
				t.Errorf("tok/s shows %q with the server's rate %v", r.Toks, r.Rate)
			}
			measure("after a reply")
			// the third turn carries the second in its history
			must("third turn", chromedp.Do(ctx,
				chromedp.SetValue(chromedp.ID("input"), "Then"),
				chromedp.Click(chromedp.ID("send")),
			))
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll(".assistant").length === 3 && !document.getElementById("send").disabled`))
			must("waiting for the third reply", err)
			must("request body", json.Unmarshal([]byte(rec.last()), &body))
			if len(body.Messages) != 3 || body.Messages[1].Role != "assistant" {
				t.Errorf("the third turn sent %d messages; want user, assistant, user", len(body.Messages))
			}
			// an image from a file goes as an image_url part (this model
			// reads none: the turn fails and is marked)
			img := image.NewRGBA(image.Rect(0, 0, 40, 30))
			for i := range img.Pix {
				img.Pix[i] = uint8(i)
			}
			img.Set(0, 0, color.RGBA{255, 0, 0, 255})
			pngPath := filepath.Join(t.TempDir(), "photo.png")
			f, err := os.Create(pngPath)
			must("png", err)
			must("png", png.Encode(f, img))
			f.Close()
			must("attaching", chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("file"), []string{pngPath})))
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll("#attachments img").length === 1`))
			must("thumbnail", err)
			measure("with an attachment")
			must("image turn", chromedp.Do(ctx,
				chromedp.SetValue(chromedp.ID("input"), "What is in the picture?"),
				chromedp.Click(chromedp.ID("send")),
			))
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll(".assistant").length === 4 && !document.getElementById("send").disabled`))
			must("waiting for the image turn", err)
			if last := rec.last(); !strings.Contains(last, `"image_url"`) || !strings.Contains(last, "data:image/jpeg;base64,") {
				t.Errorf("the image turn sent no image_url part: %.300s", last)
			}
			// markdown and reasoning rendering
			type rendered struct {
				Open                         bool
				Reasoning, Code, Strong, Raw string
				Scripts                      int
			}
			src, _ := json.Marshal("<think>first I plan</think>\n\nHere is **bold** and `x`:\n```go\nfmt.Println(\"<script>alert(1)</script>\")\n```\n- one\n- two")
			rd, err := chromedp.Run(ctx, chromedp.Evaluate[rendered](`(() => { const el = assistantBubble();
				const s = splitReasoning(`+string(src)+`);
				renderReply(el, s.reasoning, s.answer);
				const d = el.querySelector("details.reasoning");
				return { Open: d ? d.open : true, Reasoning: d ? d.textContent : "", Code: (el.querySelector("pre code") || {}).textContent || "",
					Strong: (el.querySelector("strong") || {}).textContent || "", Raw: el.querySelector(".body").textContent,
					Scripts: el.querySelectorAll("script").length }; })()`))
			must("rendering", err)
			if rd.Open || !strings.Contains(rd.Reasoning, "first I plan") || strings.Contains(rd.Raw, "first I plan") {
				t.Errorf("reasoning: open %v, %q; answer %q", rd.Open, rd.Reasoning, rd.Raw)
			}
			if rd.Code != `fmt.Println("<script>alert(1)</script>")` || rd.Strong != "bold" || rd.Scripts != 0 {
				t.Errorf("markdown: code %q, strong %q, %d script elements", rd.Code, rd.Strong, rd.Scripts)
			}
			measure("after markdown")
			shot("chat")
		})
	}
}

// TestWebChatModels: with several models served, the settings offer a
// choice of model, and a message goes to the one chosen.
func TestWebChatModels(t *testing.T) {
	sources, one := storiesSources(t)
	mu, err := NewMulti(sources, Options{}, MultiOptions{MaxMemory: 3 * one})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordChats{h: mu.Handler()}
	hs := httptest.NewServer(rec)
	defer func() {
		hs.Close()
		mu.Close()
	}()
	ctx := browser(t, hs.URL+"/", 1280, 800, false)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("model-select"))); err != nil {
		t.Fatalf("no model choice: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("model-select"), "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("model-select").dispatchEvent(new Event("change")); true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("max-tokens"), "8"),
		chromedp.SetValue(chromedp.ID("input"), "Once upon a time"),
		chromedp.Click(chromedp.ID("send")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll(".assistant").length === 1 && !document.getElementById("send").disabled`)); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal([]byte(rec.last()), &body); err != nil || body.Model != "b" {
		t.Errorf("the message went to model %q (%v); want b", body.Model, err)
	}
	name, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("model-name")))
	if err != nil || name != "b" {
		t.Errorf("the header names model %q", name)
	}
	if failed, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".failed").length`)); failed != 0 {
		t.Errorf("%d failed turns", failed)
	}
}
