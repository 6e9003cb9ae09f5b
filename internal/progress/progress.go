// Package progress draws the progress of long work on a terminal: the
// tensor-by-tensor passes of quantize and compile, and the downloads of a
// pull. Nothing is drawn where the output is not a terminal.
package progress

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/aotlm/aotlm/internal/termsafe"
)

// IsTerminal reports whether stream (a reader or a writer) is a terminal.
func IsTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Tensors draws the progress of a tensor-by-tensor pass on a terminal:
// tensors done of the total, and bytes written with the rate. It draws
// nothing when w is not a terminal.
type Tensors struct {
	w     io.Writer
	verb  string
	start time.Time
	bar   *progressbar.ProgressBar
}

// NewTensors draws on w, labelled with verb ("quantize", "compile").
func NewTensors(w io.Writer, verb string) *Tensors {
	return &Tensors{w: w, verb: verb, start: time.Now()}
}

// Update shows done of total tensors and bytes written (of totalBytes,
// when it is known, i.e. > 0).
func (b *Tensors) Update(done, total int, bytes, totalBytes int64) {
	if !IsTerminal(b.w) {
		return
	}
	if b.bar == nil {
		b.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(b.w),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	rate := float64(bytes) / max(time.Since(b.start).Seconds(), 1e-3)
	of := ""
	if totalBytes > 0 {
		of = " of " + HumanBytes(float64(totalBytes))
	}
	b.bar.Describe(fmt.Sprintf("%s: %s%s written, %s/s, tensors", b.verb, HumanBytes(float64(bytes)), of, HumanBytes(rate)))
	b.bar.Set(done)
}

// HumanBytes formats a byte count with a binary unit.
func HumanBytes(n float64) string {
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

// Downloads draws one progress bar per file being downloaded and one for
// the total, redrawing them in place on a terminal. It implements
// load.PullProgress.
type Downloads struct {
	w     io.Writer
	mu    sync.Mutex
	total *progressbar.ProgressBar
	files map[string]*progressbar.ProgressBar
	order []string
	done  map[string]bool
	lines int
	stop  chan struct{}
	wg    sync.WaitGroup
}

// NewDownloads draws on w, which should be a terminal.
func NewDownloads(w io.Writer) *Downloads {
	return &Downloads{w: w, files: map[string]*progressbar.ProgressBar{}, done: map[string]bool{}, stop: make(chan struct{})}
}

func newBar(size int64, desc string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(size, progressbar.OptionSetWriter(io.Discard), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(0),
		progressbar.OptionSetPredictTime(true), progressbar.OptionShowCount())
}

// Plan starts the bars of the files to download, with their sizes.
func (b *Downloads) Plan(paths []string, sizes []int64) {
	if len(paths) == 0 {
		return
	}
	var total int64
	width := 0
	for _, p := range paths {
		width = max(width, len(termsafe.String(p)))
	}
	width = min(width, 40)
	b.mu.Lock()
	for i, p := range paths {
		// the names are the server's: shown escaped
		name := termsafe.String(p)
		if len(name) > width {
			name = "…" + name[len(name)-width+1:]
		}
		b.files[p] = newBar(sizes[i], fmt.Sprintf("%-*s", width, name))
		b.order = append(b.order, p)
		total += sizes[i]
	}
	sort.Strings(b.order)
	b.total = newBar(total, fmt.Sprintf("%-*s", width, "total"))
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(150 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				b.draw()
				return
			case <-t.C:
				b.draw()
			}
		}
	}()
}

// Advance moves a file's bar by n bytes (back, when n < 0).
func (b *Downloads) Advance(file string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bar := b.files[file]; bar != nil {
		cur := bar.State().CurrentNum
		bar.Set64(max(cur+n, 0))
		b.total.Add64(max(cur+n, 0) - cur)
	}
}

// Done marks a file finished.
func (b *Downloads) Done(file string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done[file] = true
}

// draw rewrites the bars of unfinished files (at most 8) and the total.
func (b *Downloads) draw() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total == nil {
		return
	}
	var sb strings.Builder
	if b.lines > 0 {
		fmt.Fprintf(&sb, "\x1b[%dA", b.lines)
	}
	n := 0
	for _, f := range b.order {
		if b.done[f] || n == 8 {
			continue
		}
		bar := b.files[f]
		if bar.State().CurrentNum == 0 {
			continue // waiting for a download slot
		}
		fmt.Fprintf(&sb, "\r\x1b[2K%s\n", bar.String())
		n++
	}
	fmt.Fprintf(&sb, "\r\x1b[2K%s\n", b.total.String())
	n++
	for i := n; i < b.lines; i++ { // clear lines left from a longer frame
		sb.WriteString("\r\x1b[2K\n")
	}
	if b.lines > n {
		fmt.Fprintf(&sb, "\x1b[%dA", b.lines-n)
	}
	b.lines = n
	io.WriteString(b.w, sb.String())
}

// Finish draws the last frame and stops redrawing.
func (b *Downloads) Finish() {
	b.mu.Lock()
	started := b.total != nil
	b.mu.Unlock()
	if started {
		close(b.stop)
		b.wg.Wait()
	}
}
