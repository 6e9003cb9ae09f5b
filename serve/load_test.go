package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// readSSE reads a chat completion stream and checks its form: every event
// a "data:" line with a chunk of the request's id, then one finish
// reason, then "data: [DONE]". It returns the text; cancel (if not nil)
// is called after the given number of chunks.
func readSSE(resp *http.Response, cancelAfter int, cancel func()) (string, error) {
	sc := bufio.NewScanner(resp.Body)
	var text strings.Builder
	id, finished, chunks := "", false, 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return "", fmt.Errorf("a line that is not data: %q", line)
		}
		if data == "[DONE]" {
			if !finished {
				return "", errors.New("[DONE] before a finish reason")
			}
			if sc.Scan() && strings.TrimSpace(sc.Text()) != "" {
				return "", fmt.Errorf("more after [DONE]: %q", sc.Text())
			}
			return text.String(), nil
		}
		var ch struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return "", fmt.Errorf("chunk %q: %v", data, err)
		}
		if id == "" {
			id = ch.ID
		}
		if ch.ID != id || ch.Object != "chat.completion.chunk" {
			return "", fmt.Errorf("chunk of id %q object %q in stream %q", ch.ID, ch.Object, id)
		}
		for _, c := range ch.Choices {
			if finished {
				return "", errors.New("a choice after the finish reason")
			}
			text.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				finished = true
			}
		}
		if chunks++; cancel != nil && chunks == cancelAfter {
			cancel()
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("the stream ended without [DONE]")
}

// TestLoad sends 200 requests (AOTLM_SOAK_REQUESTS: any number; see
// scripts/soak.sh) from 8 concurrent clients with three API keys, a
// quarter of them cancelled early, half streamed, some held to JSON:
// every finished request is well formed, requests that generate at the
// same time share decode passes, and afterwards no goroutine is left and
// the heap has not grown; over 1,000 requests or more the resident
// memory after the first tenth may not grow either.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: not in -short")
	}
	requests := 200
	if v := os.Getenv("AOTLM_SOAK_REQUESTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("AOTLM_SOAK_REQUESTS=%q: want a number of requests, at least 10", v)
		}
		requests = n
	}
	ts := newTestServer(t, Options{Parallel: 4, Queue: 8, APIKeys: []string{"key-0", "key-1", "key-2"}})
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	client := &http.Client{Transport: tr}
	do := func(ctx context.Context, body string, key int) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.http.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", fmt.Sprintf("Bearer key-%d", key))
		return client.Do(req)
	}
	// warm up, then measure the baseline
	if resp, err := do(context.Background(), `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`, 0); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	tr.CloseIdleConnections()
	goroutines, heap := settle()

	const clients = 8
	var rssWarm int64 // after the first tenth of the requests
	var (
		mu                  sync.Mutex
		failures            []string
		done                = make(chan int)
		wg                  sync.WaitGroup
		finished, cancelled int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	go func() {
		for i := range requests {
			if i == requests/10 {
				rssWarm = rss()
			}
			done <- i
		}
		close(done)
	}()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 1))
			for i := range done {
				stream := i%2 == 0
				cancelAt := 0
				if r.IntN(4) == 0 {
					cancelAt = 1 + r.IntN(6)
				}
				format := ""
				if i%7 == 3 {
					format = `, "response_format": {"type": "json_object"}`
				}
				body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Tell story %d"}], "max_tokens": %d, "temperature": 0.8, "seed": %d, "stream": %v%s}`,
					i%5, 8+r.IntN(40), i, stream, format)
				ctx, cancel := context.WithCancel(context.Background())
				if cancelAt > 0 && !stream {
					time.AfterFunc(time.Duration(cancelAt)*time.Millisecond, cancel)
				}
				resp, err := do(ctx, body, i%3)
				if err != nil {
					cancel()
					if cancelAt > 0 && errors.Is(err, context.Canceled) {
						mu.Lock()
						cancelled++
						mu.Unlock()
						continue
					}
					fail("request %d: %v", i, err)
					continue
				}
				if resp.StatusCode != 200 {
					fail("request %d: status %d", i, resp.StatusCode)
				} else if stream {
					_, err = readSSE(resp, cancelAt, cancel)
				} else {
					var out chatResponse
					err = json.NewDecoder(resp.Body).Decode(&out)
					if err == nil && (len(out.Choices) != 1 || out.Usage == nil || out.Choices[0].FinishReason == nil) {
						err = fmt.Errorf("incomplete answer %+v", out)
					}
				}
				resp.Body.Close()
				cancel()
				mu.Lock()
				switch {
				case err != nil && cancelAt > 0 && ctx.Err() != nil:
					cancelled++
				case err != nil:
					failures = append(failures, fmt.Sprintf("request %d: %v", i, err))
				default:
					finished++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if finished+cancelled != requests || cancelled == 0 || finished < requests/2 {
		t.Errorf("%d finished and %d cancelled of %d", finished, cancelled, requests)
	}
	// Four sessions generate most of the time: a pass waits for a busy
	// session's next token for at least 2ms (sampling and sending one
	// token take tens of microseconds), so passes of several rows are the
	// rule; one of the thousands of passes is enough here.
	ds := ts.m.DecodeStats()
	if ds.Rows <= ds.Passes {
		t.Errorf("%d decode passes advanced %d rows: the requests never shared a pass", ds.Passes, ds.Rows)
	}
	tr.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.pool.busy() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var g2 int
	var h2 uint64
	for {
		g2, h2 = settle()
		if g2 <= goroutines || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g2 > goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the load, %d before:\n%s", g2, goroutines, buf[:runtime.Stack(buf, true)])
	}
	// the sessions' caches are allocated up front: the heap may move by
	// buffers of the HTTP stack, not by anything per request
	if h2 > heap+8<<20 {
		t.Errorf("heap grew from %d to %d bytes", heap, h2)
	}
	rssEnd := rss()
	if requests >= 1000 && rssWarm > 0 && rssEnd > rssWarm+32<<20 {
		t.Errorf("resident memory grew from %d to %d KiB over %d requests", rssWarm>>10, rssEnd>>10, requests)
	}
	t.Logf("%d requests finished, %d cancelled; %d decode passes of %.2f rows on average; goroutines %d -> %d, heap %d -> %d KiB, resident %d -> %d KiB",
		finished, cancelled, ds.Passes, float64(ds.Rows)/float64(max(ds.Passes, 1)), goroutines, g2, heap>>10, h2>>10, rssWarm>>10, rssEnd>>10)
}

// rss returns the process's resident memory in bytes (0 where
// /proc/self/statm cannot be read).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// settle collects garbage and returns the goroutine count and live heap.
func settle() (int, uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapAlloc
}
