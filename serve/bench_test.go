package serve

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm"
)

// BenchmarkAggregateDecode measures the tokens per second of N streams
// generating at once through /v1/completions (N = 1, 2, 4, 8, one session
// each), as llama-server --parallel N is measured. The model is
// $AOTLM_BENCH_MODEL (an artifact) or stories260K; threads $AOTLM_BENCH_THREADS.
//
//	AOTLM_BENCH_MODEL=qwen3-shape.aot go test -run '^$' -bench AggregateDecode ./internal/server
func BenchmarkAggregateDecode(b *testing.B) {
	var m *aotlm.Model
	if path := os.Getenv("AOTLM_BENCH_MODEL"); path != "" {
		threads := 0
		fmt.Sscan(os.Getenv("AOTLM_BENCH_THREADS"), &threads)
		var err error
		if m, err = aotlm.Open(path, aotlm.Options{Threads: threads, Context: 512}); err != nil {
			b.Fatal(err)
		}
		defer m.Close()
	} else {
		m = openStories(b)
	}
	const tokens = 64
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			ts := newTestServerFor(b, m, Options{Parallel: n})
			body := fmt.Sprintf(`{"prompt": "Once upon a time", "max_tokens": %d, "temperature": 0, "ignore_eos": true}`, tokens)
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := http.Post(ts.http.URL+"/v1/completions", "application/json", strings.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("status %d", resp.StatusCode)
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(n*tokens*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
