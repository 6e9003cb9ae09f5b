package load

import (
	"context"
	"fmt"
	"os"

	"github.com/aotlm/aotlm/internal/hf/hub"
)

// IsHubRef tells whether arg names a Hugging Face Hub repository to pull
// (org/name[@rev][:QUANT]) rather than a file or folder: it has that
// form and no file or folder of that name exists.
func IsHubRef(arg string) bool {
	_, err := os.Stat(arg)
	return err != nil && hub.LooksLikeRef(arg)
}

// Pull pulls the Hub reference arg into the Hugging Face cache with the
// environment's Hub settings (hub.FromEnv), telling progress (when not
// nil) how the files come. It returns the parsed reference and what the
// pull found or fetched; ctx stops it, the partial files kept for the
// next pull to resume.
func Pull(ctx context.Context, arg string, progress hub.Progress) (hub.Ref, *hub.Result, error) {
	ref, err := hub.ParseRef(arg)
	if err != nil {
		return ref, nil, err
	}
	opts, err := hub.FromEnv()
	if err != nil {
		return ref, nil, err
	}
	if progress != nil {
		opts.Progress = progress
	}
	c, err := hub.New(opts)
	if err != nil {
		return ref, nil, err
	}
	res, err := c.Pull(ctx, ref)
	if err != nil {
		return ref, nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return ref, res, nil
}
