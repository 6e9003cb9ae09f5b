package load

import (
	"context"
	"fmt"
	"os"

	"github.com/aotlm/aotlm/internal/hf/hub"
	"github.com/aotlm/aotlm/internal/termsafe"
)

// IsHubRef tells whether arg names a Hugging Face Hub repository to pull
// (org/name[@rev][:QUANT]) rather than a file or folder: it has that
// form and no file or folder of that name exists.
func IsHubRef(arg string) bool {
	_, err := os.Stat(arg)
	return err != nil && hub.LooksLikeRef(arg)
}

// PullResult is what a pull found or fetched: the snapshot, the model
// in it to open, the bytes transferred.
type PullResult = hub.Result

// PullProgress is told how a pull's files come, for a progress display.
type PullProgress interface {
	// Plan is called once with the files to download (paths[i] of
	// sizes[i] bytes), before any transfer.
	Plan(paths []string, sizes []int64)
	// Advance reports n more bytes of file on disk (resumed bytes
	// included).
	Advance(file string, n int64)
	// Done reports the end of one file's download.
	Done(file string, err error)
}

// hubProgress tells a PullProgress what the Hub client reports.
type hubProgress struct{ PullProgress }

func (p hubProgress) Plan(files []hub.File) {
	paths, sizes := make([]string, len(files)), make([]int64, len(files))
	for i, f := range files {
		paths[i], sizes[i] = f.Path, f.Size
	}
	p.PullProgress.Plan(paths, sizes)
}

// Pull pulls the Hub reference arg into the Hugging Face cache with the
// environment's Hub settings (hub.FromEnv), telling progress (when not
// nil) how the files come. It returns the parsed reference and what the
// pull found or fetched; ctx stops it, the partial files kept for the
// next pull to resume. Its errors are safe to print on a terminal: what
// the server chose to name in them has its control characters escaped.
func Pull(ctx context.Context, arg string, progress PullProgress) (hub.Ref, *PullResult, error) {
	ref, err := hub.ParseRef(arg)
	if err != nil {
		return ref, nil, err
	}
	opts, err := hub.FromEnv()
	if err != nil {
		return ref, nil, err
	}
	if progress != nil {
		opts.Progress = hubProgress{progress}
	}
	c, err := hub.New(opts)
	if err != nil {
		return ref, nil, err
	}
	res, err := c.Pull(ctx, ref)
	if err != nil {
		return ref, nil, termsafe.Error(fmt.Errorf("pull %s: %w", ref, err))
	}
	return ref, res, nil
}

// Printable is s with what a terminal would act on (control characters,
// escape sequences, bidirectional overrides) escaped: for names a server
// chose.
func Printable(s string) string { return termsafe.String(s) }
