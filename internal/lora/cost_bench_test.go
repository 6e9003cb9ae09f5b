package lora_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/lora"
)

// BenchmarkAdapterDecodeCost measures what a run-time adapter costs a
// decoded token: on the artifact $AOTLM_LORA_MODEL with the adapter
// $AOTLM_LORA_ADAPTER (a PEFT folder or GGUF adapter for it), two
// sessions of two threads, one without the adapter and one with it (in
// float32, then binary16, then 8 bits), decode token after token in turn, the
// order swapped each round, so that both see the same load of a shared
// machine. It reports the median of the per-round ratios of the adapted
// token's time to the base token's (ratio-f32, ratio-f16, ratio-q8) and the base's
// median milliseconds per token.
//
//	go run ./internal/lora/loragen -model qwen3-0.6b-q4_0.gguf -o r16/ -rank 16
//	aotlm compile qwen3-0.6b-q4_0.gguf -o q.aot --ctx 512
//	AOTLM_LORA_MODEL=q.aot AOTLM_LORA_ADAPTER=r16 go test ./internal/lora -run X -bench AdapterDecodeCost -benchtime 1x
func BenchmarkAdapterDecodeCost(b *testing.B) {
	model, adapter := os.Getenv("AOTLM_LORA_MODEL"), os.Getenv("AOTLM_LORA_ADAPTER")
	if model == "" || adapter == "" {
		b.Skip("set AOTLM_LORA_MODEL (an artifact) and AOTLM_LORA_ADAPTER (its adapter) to measure")
	}
	e, err := engine.Open(model)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	const rounds = 200
	for b.Loop() {
		var baseMs []float64
		for _, st := range []engine.AdapterStorage{engine.AdapterF32, engine.AdapterF16, engine.AdapterQ8} {
			name := st.String()
			ad, err := lora.ForEngine(e, name, adapter, 1, st)
			if err != nil {
				b.Fatal(err)
			}
			var ss [2]*engine.Session
			for i := range ss {
				if ss[i], err = e.NewSession(engine.SessionOptions{Threads: 2}); err != nil {
					b.Fatal(err)
				}
				defer ss[i].Close()
				if _, err := ss[i].Prefill([]int{1, 2, 3}); err != nil {
					b.Fatal(err)
				}
			}
			if err := ss[1].SetAdapter(ad, 1); err != nil {
				b.Fatal(err)
			}
			var ratios []float64
			for r := 0; r < rounds; r++ {
				var ms [2]float64
				for k := 0; k < 2; k++ {
					i := (k + r) % 2
					start := time.Now()
					if _, err := ss[i].Decode(100 + r); err != nil {
						b.Fatal(err)
					}
					ms[i] = float64(time.Since(start).Microseconds()) / 1000
				}
				ratios = append(ratios, ms[1]/ms[0])
				baseMs = append(baseMs, ms[0])
			}
			b.ReportMetric(median(ratios), "ratio-"+name)
		}
		b.ReportMetric(median(baseMs), "base-ms/token")
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
