package aotlm_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/aotlm/aotlm"
)

// BenchmarkChatTTFT measures a chat's time to first token at turns 2, 4
// and 8, with the session's cache reused across turns and without (a fresh
// session prefilling the whole conversation). Each turn adds 64 user
// tokens and a 32-token reply. The model is $AOTLM_TTFT_MODEL (an
// artifact, e.g. one of docs/benchmarks.md's shapes), else stories260K:
//
//	AOTLM_TTFT_MODEL=smollm2.aot go test -run '^$' -bench ChatTTFT -benchtime 3x .
func BenchmarkChatTTFT(b *testing.B) {
	var m *aotlm.Model
	if p := os.Getenv("AOTLM_TTFT_MODEL"); p != "" {
		var err error
		if m, err = aotlm.Open(p, aotlm.Options{Threads: 2, IDsOnly: true}); err != nil {
			b.Fatal(err)
		}
		defer m.Close()
	} else {
		m = stories(b, "hybrid")
	}
	vocab := m.Info().Vocab
	for _, reuse := range []bool{true, false} {
		for _, turns := range []int{2, 4, 8} {
			b.Run(fmt.Sprintf("reuse=%v/turn=%d", reuse, turns), func(b *testing.B) {
				var total time.Duration
				for range b.N {
					r := rand.New(rand.NewPCG(1, 2))
					s, err := m.NewSession(0)
					if err != nil {
						b.Fatal(err)
					}
					var conv []int
					var last time.Duration
					for k := 1; k <= turns; k++ {
						for range 64 {
							conv = append(conv, 3+r.IntN(vocab-3))
						}
						if !reuse {
							s.Close()
							if s, err = m.NewSession(0); err != nil {
								b.Fatal(err)
							}
						}
						res, err := s.Generate(context.Background(), aotlm.Request{IDs: conv, MaxTokens: 32, IgnoreEOS: true}, nil)
						if err != nil {
							b.Fatal(err)
						}
						last = res.TTFT
						conv = append(conv, res.IDs...)
					}
					total += last
					s.Close()
				}
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ttft_ms")
			})
		}
	}
}
