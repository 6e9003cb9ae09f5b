package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAggregateStreams measures an OpenAI-compatible server that is
// already running at $AOTLM_LOAD_URL (aotlm serve, llama-server, ...), and
// skips without it. For each N of $AOTLM_LOAD_STREAMS (default 1,2,4,8) it
// opens N streaming /v1/completions requests at once, each greedy for
// $AOTLM_LOAD_TOKENS tokens (default 128) with ignore_eos, checks that
// every stream ends by length and with [DONE], and logs the tokens all the
// streams generated per second of wall time (first request sent to last
// stream done), $AOTLM_LOAD_REPS times (default 1).
//
//	AOTLM_LOAD_URL=http://127.0.0.1:8080 go test -v -run AggregateStreams ./internal/server
func TestAggregateStreams(t *testing.T) {
	url := os.Getenv("AOTLM_LOAD_URL")
	if url == "" {
		t.Skip("set AOTLM_LOAD_URL to the address of a running server to measure it")
	}
	tokens, reps := envInt(t, "AOTLM_LOAD_TOKENS", 128), envInt(t, "AOTLM_LOAD_REPS", 1)
	streams := []int{1, 2, 4, 8}
	if s := os.Getenv("AOTLM_LOAD_STREAMS"); s != "" {
		streams = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("AOTLM_LOAD_STREAMS=%q: want numbers of streams, such as 1,2,4,8", s)
			}
			streams = append(streams, n)
		}
	}
	body := fmt.Sprintf(`{"prompt": "Once upon a time, in a small village by the sea, there lived", "max_tokens": %d, "temperature": 0, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}`, tokens)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, n := range streams {
		for range reps {
			var wg sync.WaitGroup
			got := make([]int, n)
			ttft := make([]time.Duration, n)
			errs := make([]error, n)
			start := time.Now()
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], ttft[i], errs[i] = streamCompletion(client, url+"/v1/completions", body, start)
				}()
			}
			wg.Wait()
			wall := time.Since(start)
			total := 0
			var first time.Duration
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("%d streams: stream %d: %v", n, i, errs[i])
				}
				if got[i] != tokens {
					t.Fatalf("%d streams: stream %d generated %d tokens, asked %d", n, i, got[i], tokens)
				}
				total += got[i]
				first += ttft[i]
			}
			t.Logf("streams=%d tokens=%d seconds=%.3f tok_s=%.2f mean_ttft_ms=%.1f",
				n, total, wall.Seconds(), float64(total)/wall.Seconds(), float64(first.Milliseconds())/float64(n))
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// streamCompletion posts one streaming completion and returns how many
// tokens it generated (the usage's count, else the chunks of text) and
// when its first text arrived after start; the stream must end by length
// and with [DONE].
func streamCompletion(client *http.Client, url, body string, start time.Time) (int, time.Duration, error) {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	chunks, usage, finish := 0, -1, ""
	var ttft time.Duration
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			if finish != "length" {
				return 0, 0, fmt.Errorf("finish reason %q, want length", finish)
			}
			if usage >= 0 {
				return usage, ttft, nil
			}
			return chunks, ttft, nil
		}
		var ch struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return 0, 0, fmt.Errorf("chunk %q: %v", data, err)
		}
		for _, c := range ch.Choices {
			if c.Text != "" {
				if chunks++; chunks == 1 {
					ttft = time.Since(start)
				}
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("the stream ended without [DONE]")
}
