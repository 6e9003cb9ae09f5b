package serve

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aotlm/aotlm"
)

// rateWindow is the span over which /metrics reports tokens per second.
const rateWindow = 10

// metrics counts what the server did.
type metrics struct {
	start     time.Time
	active    atomic.Int64
	cancelled atomic.Int64
	prompt    atomic.Int64 // prompt tokens of finished generations
	reused    atomic.Int64 // of them, taken from a session's cache
	generated atomic.Int64 // tokens generated
	prefillNs atomic.Int64
	decodeNs  atomic.Int64
	// of speculative generations: guessed tokens, those kept, the
	// passes, those that verified guesses, the tokens the passes chose,
	// the fallbacks to plain decoding
	drafted, accepted, specPasses, verify, specTokens, fallbacks atomic.Int64

	mu       sync.Mutex
	requests map[[2]string]int64 // (path, status) -> count
	// per-second counts of generated tokens over the last rateWindow
	// seconds, for the aggregate rate
	secs   [rateWindow + 1]int64
	counts [rateWindow + 1]int64
}

func (m *metrics) request(path string, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	m.mu.Lock()
	if m.requests == nil {
		m.requests = map[[2]string]int64{}
	}
	m.requests[[2]string{path, fmt.Sprint(status)}]++
	m.mu.Unlock()
}

// token counts one generated token in the rate window.
func (m *metrics) token() {
	now := time.Now().Unix()
	i := now % int64(len(m.secs))
	m.mu.Lock()
	if m.secs[i] != now {
		m.secs[i], m.counts[i] = now, 0
	}
	m.counts[i]++
	m.mu.Unlock()
}

// rate is the generated tokens per second over the last full seconds.
func (m *metrics) rate() float64 {
	now := time.Now().Unix()
	var n int64
	m.mu.Lock()
	for i, s := range m.secs {
		if s < now && s >= now-rateWindow {
			n += m.counts[i]
		}
	}
	m.mu.Unlock()
	return float64(n) / rateWindow
}

func (m *metrics) result(r *aotlm.Result) {
	m.prompt.Add(int64(len(r.PromptIDs)))
	m.reused.Add(int64(r.Reused))
	m.generated.Add(int64(len(r.IDs)))
	m.prefillNs.Add(int64(r.Prefill))
	m.decodeNs.Add(int64(r.Decode))
	if d := r.Decoding; d != nil {
		m.drafted.Add(int64(d.Drafted))
		m.accepted.Add(int64(d.Accepted))
		m.specPasses.Add(int64(d.Passes))
		m.verify.Add(int64(d.Verify))
		m.specTokens.Add(int64(d.Tokens))
		m.fallbacks.Add(int64(d.Fallbacks))
	}
}

// handleMetrics answers GET /metrics in the Prometheus text format.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) *apiError {
	m := &s.metrics
	var b strings.Builder
	metric := func(name, kind, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	}
	metric("aotlm_requests_total", "counter", "HTTP requests answered, by path and status code.")
	m.mu.Lock()
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	for _, k := range keys {
		fmt.Fprintf(&b, "aotlm_requests_total{path=%q,code=%q} %d\n", k[0], k[1], m.requests[k])
	}
	m.mu.Unlock()
	metric("aotlm_prompt_tokens_total", "counter", "Prompt tokens of finished generations.")
	fmt.Fprintf(&b, "aotlm_prompt_tokens_total %d\n", m.prompt.Load())
	metric("aotlm_prompt_tokens_cached_total", "counter", "Prompt tokens found in a session's cache and not prefilled again.")
	fmt.Fprintf(&b, "aotlm_prompt_tokens_cached_total %d\n", m.reused.Load())
	metric("aotlm_generated_tokens_total", "counter", "Tokens generated.")
	fmt.Fprintf(&b, "aotlm_generated_tokens_total %d\n", m.generated.Load())
	metric("aotlm_prefill_seconds_total", "counter", "Time spent prefilling prompts.")
	fmt.Fprintf(&b, "aotlm_prefill_seconds_total %g\n", time.Duration(m.prefillNs.Load()).Seconds())
	metric("aotlm_decode_seconds_total", "counter", "Time spent generating, summed over requests.")
	fmt.Fprintf(&b, "aotlm_decode_seconds_total %g\n", time.Duration(m.decodeNs.Load()).Seconds())
	ds := s.m.DecodeStats()
	metric("aotlm_decode_passes_total", "counter", "Decode passes that advanced the requests generating at the same time, one row each or a chain of guesses to verify.")
	fmt.Fprintf(&b, "aotlm_decode_passes_total %d\n", ds.Passes)
	metric("aotlm_decode_rows_total", "counter", "Rows of those passes: divided by the passes, the mean number of rows a pass advanced.")
	fmt.Fprintf(&b, "aotlm_decode_rows_total %d\n", ds.Rows)
	metric("aotlm_decode_verify_passes_total", "counter", "Of those passes, the ones that held chains of guesses to verify.")
	fmt.Fprintf(&b, "aotlm_decode_verify_passes_total %d\n", ds.Verify)
	metric("aotlm_decode_verify_rows_total", "counter", "Rows of those chains.")
	fmt.Fprintf(&b, "aotlm_decode_verify_rows_total %d\n", ds.VerifyRows)
	metric("aotlm_spec_decode_num_draft_tokens_total", "counter", "Guessed tokens that speculative generations offered for verification.")
	fmt.Fprintf(&b, "aotlm_spec_decode_num_draft_tokens_total %d\n", m.drafted.Load())
	metric("aotlm_spec_decode_num_accepted_tokens_total", "counter", "Of them, the tokens the model kept.")
	fmt.Fprintf(&b, "aotlm_spec_decode_num_accepted_tokens_total %d\n", m.accepted.Load())
	metric("aotlm_spec_decode_num_drafts_total", "counter", "Verify steps of speculative generations (a chain of guesses checked in a pass).")
	fmt.Fprintf(&b, "aotlm_spec_decode_num_drafts_total %d\n", m.verify.Load())
	metric("aotlm_spec_decode_passes_total", "counter", "Passes of speculative generations, verify and plain.")
	fmt.Fprintf(&b, "aotlm_spec_decode_passes_total %d\n", m.specPasses.Load())
	metric("aotlm_spec_decode_tokens_total", "counter", "Tokens those passes chose: divided by the passes, the tokens per pass.")
	fmt.Fprintf(&b, "aotlm_spec_decode_tokens_total %d\n", m.specTokens.Load())
	metric("aotlm_spec_decode_fallbacks_total", "counter", "Switches of speculative generations to plain decoding because guessing did not pay.")
	fmt.Fprintf(&b, "aotlm_spec_decode_fallbacks_total %d\n", m.fallbacks.Load())
	metric("aotlm_requests_cancelled_total", "counter", "Generations ended because the client went away.")
	fmt.Fprintf(&b, "aotlm_requests_cancelled_total %d\n", m.cancelled.Load())
	metric("aotlm_requests_processing", "gauge", "Requests generating now.")
	fmt.Fprintf(&b, "aotlm_requests_processing %d\n", m.active.Load())
	metric("aotlm_requests_queued", "gauge", "Requests waiting for a session.")
	fmt.Fprintf(&b, "aotlm_requests_queued %d\n", s.pool.wait.Load())
	metric("aotlm_slots", "gauge", "Sessions that generate at once.")
	fmt.Fprintf(&b, "aotlm_slots %d\n", len(s.pool.slots))
	metric("aotlm_tokens_per_second", "gauge", fmt.Sprintf("Tokens generated per second by all requests together over the last %d seconds.", rateWindow))
	fmt.Fprintf(&b, "aotlm_tokens_per_second %g\n", m.rate())
	metric("aotlm_uptime_seconds", "gauge", "Seconds since the server started.")
	fmt.Fprintf(&b, "aotlm_uptime_seconds %g\n", time.Since(m.start).Seconds())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
	return nil
}
