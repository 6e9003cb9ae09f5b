package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aotlm/aotlm"
)

// storiesSources are two models over the stories260K artifact, each
// opened on its own (as two files would be), and the memory one of them
// takes with one session.
func storiesSources(t *testing.T) ([]ModelSource, int64) {
	t.Helper()
	openStories(t) // compiles the artifact
	st, err := os.Stat(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	open := func() (*aotlm.Model, error) {
		m, err := aotlm.Open(modelPath, aotlm.Options{Threads: 1})
		if err != nil {
			return nil, err
		}
		if err := m.SetChatTemplate("chatml", chatML); err != nil {
			m.Close()
			return nil, err
		}
		return m, nil
	}
	m, err := open()
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	one := st.Size() + s.MemoryBytes()
	s.Close()
	m.Close()
	return []ModelSource{{ID: "a", Open: open, Bytes: st.Size()}, {ID: "b", Open: open, Bytes: st.Size()}}, one
}

// metric reads one value of a Prometheus text.
func metric(t *testing.T, text, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in the metrics:\n%s", name, text)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestMultiBudget serves two models in a memory budget that holds one:
// alternating requests both succeed (each load unloads the other), so do
// concurrent requests for both (they wait for room), /v1/models lists
// both, /metrics counts the loads, an unknown model is refused, and
// IdleUnload unloads a model left alone.
func TestMultiBudget(t *testing.T) {
	sources, one := storiesSources(t)
	mu, err := NewMulti(sources, Options{Parallel: 1}, MultiOptions{MaxMemory: one + one/2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mu.Handler())
	defer func() {
		hs.Close()
		mu.Close()
	}()
	ts := &testServer{http: hs}
	chat := func(model string) (int, string) {
		body := fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 4}`, model)
		resp, b := send(t, ts, http.MethodPost, "/v1/chat/completions", body, map[string]string{"Content-Type": "application/json"})
		var r chatResponse
		json.Unmarshal([]byte(b), &r)
		return resp.StatusCode, r.Model
	}
	for i, model := range []string{"a", "b", "a", "b", "b"} {
		if code, got := chat(model); code != http.StatusOK || got != model {
			t.Fatalf("request %d for %s: status %d, answered by %q", i, model, code, got)
		}
	}
	_, text := send(t, ts, http.MethodGet, "/metrics", "", nil)
	if loads, unloads, loaded := metric(t, text, "aotlm_model_loads_total"), metric(t, text, "aotlm_model_unloads_total"), metric(t, text, "aotlm_models_loaded"); loads != 4 || unloads != 3 || loaded != 1 {
		t.Errorf("after a, b, a, b, b: %d loads, %d unloads, %d loaded; want 4, 3, 1", loads, unloads, loaded)
	}
	if used := metric(t, text, "aotlm_memory_bytes"); int64(used) > one+one/2 || int64(used) < one {
		t.Errorf("memory of the loaded models %d bytes; want one model's %d within the budget %d", used, one, one+one/2)
	}
	if resp, page := send(t, ts, http.MethodGet, "/", "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(page, "<title>aotlm chat</title>") {
		t.Errorf("the chat page: status %d", resp.StatusCode)
	}
	_, list := send(t, ts, http.MethodGet, "/v1/models", "", nil)
	if !strings.Contains(list, `"id":"a"`) || !strings.Contains(list, `"id":"b"`) {
		t.Errorf("/v1/models lists %s", list)
	}
	if code, _ := chat("c"); code != http.StatusNotFound {
		t.Errorf("an unknown model: status %d, want 404", code)
	}
	// concurrent requests for both models
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := []string{"a", "b"}[i%2]
			if code, got := chat(model); code != http.StatusOK || got != model {
				errs <- fmt.Sprintf("concurrent request for %s: status %d, answered by %q", model, code, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}

	// idle models are unloaded
	mu2, err := NewMulti(sources, Options{}, MultiOptions{MaxMemory: 4 * one, IdleUnload: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs2 := httptest.NewServer(mu2.Handler())
	defer func() {
		hs2.Close()
		mu2.Close()
	}()
	ts2 := &testServer{http: hs2}
	resp, _ := send(t, ts2, http.MethodPost, "/v1/completions", `{"prompt": "Once", "max_tokens": 2}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion on the first model: status %d", resp.StatusCode)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(mu2.loadedIDs()) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ids := mu2.loadedIDs(); len(ids) != 0 {
		t.Errorf("models %v still loaded after the idle time", ids)
	}
	// a model over the budget is refused at the start
	if _, err := NewMulti([]ModelSource{{ID: "x", Open: sources[0].Open, Bytes: 10}}, Options{}, MultiOptions{MaxMemory: 5}); err == nil {
		t.Error("a model larger than the budget: accepted")
	}
}

// TestLoadMulti sends requests for two models from 8 concurrent clients
// in a budget that holds one (so the models load and unload all along),
// a quarter of them cancelled early: every request that is not cancelled
// succeeds, and after the Multi closes no goroutine is left (and over
// 1,000 requests or more the resident memory has not grown).
// AOTLM_SOAK_REQUESTS sets the number of requests (scripts/soak.sh).
func TestLoadMulti(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: not in -short")
	}
	requests := 160
	if v := os.Getenv("AOTLM_SOAK_REQUESTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("AOTLM_SOAK_REQUESTS=%q: want a number of requests, at least 10", v)
		}
		requests = n
	}
	sources, one := storiesSources(t)
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	client := &http.Client{Transport: tr}
	goroutines, _ := settle()
	mu, err := NewMulti(sources, Options{Parallel: 2}, MultiOptions{MaxMemory: one + one/2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mu.Handler())
	var (
		wg                  sync.WaitGroup
		lock                sync.Mutex
		finished, cancelled int
		failures            []string
	)
	next := make(chan int)
	var rssWarm int64 // after the first tenth of the requests
	go func() {
		for i := range requests {
			if i == requests/10 {
				rssWarm = rss()
			}
			next <- i
		}
		close(next)
	}()
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				model := []string{"a", "b"}[(i/3)%2]
				ctx, cancel := context.WithCancel(context.Background())
				cancelled1 := (i+c)%4 == 0
				if cancelled1 {
					time.AfterFunc(time.Duration(1+i%5)*time.Millisecond, cancel)
				}
				body := fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "Tell story %d"}], "max_tokens": %d, "stream": %v}`,
					model, i%5, 4+i%20, i%2 == 0)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(body))
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				lock.Lock()
				switch {
				case err != nil && cancelled1 && ctx.Err() != nil:
					cancelled++
				case err != nil:
					failures = append(failures, fmt.Sprintf("request %d (%s): %v", i, model, err))
				default:
					finished++
				}
				lock.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	loads := mu.loads.Load()
	hs.Close()
	tr.CloseIdleConnections()
	mu.Close()
	deadline := time.Now().Add(10 * time.Second)
	g2, _ := settle()
	for g2 > goroutines && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		g2, _ = settle()
	}
	if g2 > goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the load, %d before:\n%s", g2, goroutines, buf[:runtime.Stack(buf, true)])
	}
	if rssEnd := rss(); requests >= 1000 && rssWarm > 0 && rssEnd > rssWarm+32<<20 {
		t.Errorf("resident memory grew from %d to %d KiB over %d requests", rssWarm>>10, rssEnd>>10, requests)
	}
	if finished < requests/2 || loads < 2 {
		t.Errorf("%d finished, %d cancelled of %d, %d loads", finished, cancelled, requests, loads)
	}
	t.Logf("%d of %d requests finished, %d cancelled; %d model loads; goroutines %d -> %d", finished, requests, cancelled, loads, goroutines, g2)
}
