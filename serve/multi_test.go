package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
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
