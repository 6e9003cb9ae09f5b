package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
)

// VerifyRow is the time of one pass of Rows rows whose logits are all
// read (a speculative verify pass), and its ratio to one decode pass: by
// the wall clock, and by the process's CPU time (which, with one thread,
// other processes on a busy machine do not inflate; 0 where unknown).
type VerifyRow struct {
	Rows     int     `json:"rows"`
	Ms       float64 `json:"ms"`
	Ratio    float64 `json:"ratio"`
	CPUMs    float64 `json:"cpu_ms"`
	CPURatio float64 `json:"cpu_ratio"`
}

// VerifyPasses times, after a prompt of 64 random ids, one decode pass
// and chain passes of 1..maxRows rows with every row's logits, each the
// median of reps runs at the same position (CPU time: the mean). A
// strategy that gets Rows tokens from a pass is at most Rows/Ratio times
// as fast as plain decoding. The second result is the decode pass.
func VerifyPasses(path string, threads, maxRows, reps int) ([]VerifyRow, VerifyRow, error) {
	e, err := engine.Open(path)
	if err != nil {
		return nil, VerifyRow{}, err
	}
	defer e.Close()
	s, err := e.NewSession(engine.SessionOptions{Threads: threads})
	if err != nil {
		return nil, VerifyRow{}, err
	}
	defer s.Close()
	if maxRows > s.MaxRows() {
		return nil, VerifyRow{}, fmt.Errorf("bench: passes of %d rows: the artifact's largest plan has %d (compile with --ar-len %d)", maxRows, s.MaxRows(), maxRows)
	}
	const prompt = 64
	if prompt+maxRows > s.Context() {
		return nil, VerifyRow{}, fmt.Errorf("bench: %d positions needed, the context is %d", prompt+maxRows, s.Context())
	}
	vocab := e.Manifest().Vocab
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int, prompt+maxRows)
	for i := range ids {
		ids[i] = r.IntN(vocab)
	}
	if _, err := s.Prefill(ids[:prompt]); err != nil {
		return nil, VerifyRow{}, err
	}
	reps = max(reps, 1)
	median := func(run func() error) (float64, float64, error) {
		if err := run(); err != nil { // warm up
			return 0, 0, err
		}
		ts := make([]float64, 0, reps)
		cpu0 := cpuTime()
		for range reps {
			start := time.Now()
			if err := run(); err != nil {
				return 0, 0, err
			}
			ts = append(ts, ms(time.Since(start)))
		}
		cpu := ms(cpuTime()-cpu0) / float64(reps)
		slices.Sort(ts)
		return ts[len(ts)/2], cpu, nil
	}
	decMs, decCPU, err := median(func() error {
		if _, err := s.Decode(ids[prompt]); err != nil {
			return err
		}
		return s.Rewind(prompt)
	})
	if err != nil {
		return nil, VerifyRow{}, err
	}
	decode := VerifyRow{Rows: 1, Ms: decMs, Ratio: 1, CPUMs: decCPU, CPURatio: 1}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	var out []VerifyRow
	for k := 1; k <= maxRows; k++ {
		sel := make([]int, k)
		for i := range sel {
			sel[i] = i
		}
		t, cpu, err := median(func() error {
			_, err := s.Run(&engine.Pass{IDs: ids[prompt : prompt+k], Logits: sel})
			return err
		})
		if err != nil {
			return nil, VerifyRow{}, err
		}
		out = append(out, VerifyRow{Rows: k, Ms: t, Ratio: t / decMs, CPUMs: cpu, CPURatio: ratio(cpu, decCPU)})
	}
	return out, decode, nil
}
