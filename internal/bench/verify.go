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
// median of reps runs at the same position, each after a decode pass it
// is compared with (CPU time: the mean). A
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
	decodeOnce := func() error {
		if _, err := s.Decode(ids[prompt]); err != nil {
			return err
		}
		return s.Rewind(prompt)
	}
	// each pass of k rows is timed right after a decode pass, so that both
	// see the same machine; the ratios are of the medians (CPU: the sums)
	var out []VerifyRow
	var allDec, allDecCPU []float64
	for k := 1; k <= maxRows; k++ {
		sel := make([]int, k)
		for i := range sel {
			sel[i] = i
		}
		pass := func() error {
			_, err := s.Run(&engine.Pass{IDs: ids[prompt : prompt+k], Logits: sel})
			return err
		}
		if err := decodeOnce(); err != nil { // warm up
			return nil, VerifyRow{}, err
		}
		if err := pass(); err != nil {
			return nil, VerifyRow{}, err
		}
		var dec, ver []float64
		var decCPU, verCPU float64
		for range reps {
			for i, run := range []func() error{decodeOnce, pass} {
				c0, t0 := CPUTime(), time.Now()
				if err := run(); err != nil {
					return nil, VerifyRow{}, err
				}
				d, c := ms(time.Since(t0)), ms(CPUTime()-c0)
				if i == 0 {
					dec, decCPU = append(dec, d), decCPU+c
				} else {
					ver, verCPU = append(ver, d), verCPU+c
				}
			}
		}
		allDec, allDecCPU = append(allDec, dec...), append(allDecCPU, decCPU/float64(reps))
		m, md := median(ver), median(dec)
		out = append(out, VerifyRow{Rows: k, Ms: m, Ratio: m / md, CPUMs: verCPU / float64(reps), CPURatio: ratio(verCPU, decCPU)})
	}
	decode := VerifyRow{Rows: 1, Ms: median(allDec), Ratio: 1, CPUMs: median(allDecCPU), CPURatio: 1}
	return out, decode, nil
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
