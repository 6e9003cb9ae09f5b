package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// jobsHelp documents --jobs of quantize and compile.
const jobsHelp = "tensors processed at once (0: one per CPU); memory grows with it"

// tensorBar draws the progress of a tensor-by-tensor pass on a terminal:
// tensors done of the total, and bytes written with the rate. It draws
// nothing when w is not a terminal.
type tensorBar struct {
	w     io.Writer
	verb  string
	start time.Time
	bar   *progressbar.ProgressBar
}

func newTensorBar(w io.Writer, verb string) *tensorBar {
	return &tensorBar{w: w, verb: verb, start: time.Now()}
}

// update shows done of total tensors and bytes written (of totalBytes,
// when it is known, i.e. > 0).
func (b *tensorBar) update(done, total int, bytes, totalBytes int64) {
	if !isTerminal(b.w) {
		return
	}
	if b.bar == nil {
		b.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(b.w),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	rate := float64(bytes) / max(time.Since(b.start).Seconds(), 1e-3)
	of := ""
	if totalBytes > 0 {
		of = " of " + humanBytes(float64(totalBytes))
	}
	b.bar.Describe(fmt.Sprintf("%s: %s%s written, %s/s, tensors", b.verb, humanBytes(float64(bytes)), of, humanBytes(rate)))
	b.bar.Set(done)
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	u := 0
	for n >= 1024 && u < len(units)-1 {
		n /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%.0f %s", n, units[u])
	}
	return fmt.Sprintf("%.1f %s", n, units[u])
}
