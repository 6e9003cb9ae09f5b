// Package userfile opens the files a user names (model parts, tokenizers,
// chat templates, images, corpora, calibration text, recipes): regular
// files only, each kind within its size limit, and opened so that a named
// pipe or a device is refused at once rather than blocked on or read
// without end.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aotlm/aotlm/internal/limits"
)

// Kind is a kind of file a user names: what errors call it and the largest
// size accepted (0: no limit, for files mapped rather than read).
type Kind struct {
	Name string
	Max  int64
}

// The kinds of files read; limits holds and documents their sizes.
var (
	Text        = Kind{"text file", limits.MaxTextFile}
	Calibration = Kind{"calibration text", limits.MaxTextFile}
	Corpus      = Kind{"lookup corpus", limits.MaxCorpusFile}
	Tokenizer   = Kind{"tokenizer", limits.MaxTokenizerFile}
	Config      = Kind{"configuration file", limits.MaxConfigFile}
	Template    = Kind{"chat template", limits.MaxTemplateFile}
	Image       = Kind{"image", limits.MaxImageFile}
	Recipe      = Kind{"recipe", limits.MaxRecipeFile}
	Model       = Kind{"model file", 0}
)

// Named returns k described as name in errors, with k's limit.
func (k Kind) Named(name string) Kind { return Kind{Name: name, Max: k.Max} }

// ErrNotRegular is wrapped by the errors for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// typeError explains why a file of mode m cannot be read as k.
func typeError(path string, k Kind, m os.FileMode) error {
	if m.IsDir() {
		return fmt.Errorf("%s %s is a folder, not a file: %w", k.Name, path, ErrNotRegular)
	}
	return fmt.Errorf("%s %s is %s: %w", k.Name, path, kind(m), ErrNotRegular)
}

// sizeError is a file over k's limit.
func sizeError(path string, k Kind, size int64) error {
	what := fmt.Sprintf("%s %s", k.Name, path)
	have, limit := limits.Bytes(size), limits.Bytes(k.Max)
	if have == limit {
		// close enough to round alike: the exact counts
		have, limit = fmt.Sprintf("%d bytes", size), fmt.Sprintf("%d bytes", k.Max)
	}
	if size >= 0 {
		what += " (" + have + ")"
	}
	return &limits.Error{What: what, Limit: limit}
}

// kind names a file mode's type.
func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// Check refuses a path that is not a regular file of at most k.Max bytes,
// without opening it (for files another reader opens). A missing path
// gives the stat error, which wraps os.ErrNotExist.
func Check(path string, k Kind) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", k.Name, err)
	}
	return checkInfo(path, k, st)
}

func checkInfo(path string, k Kind, st os.FileInfo) error {
	if !st.Mode().IsRegular() {
		return typeError(path, k, st.Mode())
	}
	if k.Max > 0 && st.Size() > k.Max {
		return sizeError(path, k, st.Size())
	}
	return nil
}

// CheckModel refuses a model path that is neither a regular file nor a
// folder (a named pipe, a device, a socket). A missing path is left to the
// caller's open.
func CheckModel(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.IsDir() {
		return nil
	}
	return checkInfo(path, Model, st)
}

// Open opens path for reading as a file of kind k and returns it with its
// information. The file is opened without blocking (a named pipe with no
// writer would block a plain open) and checked after opening, so a path
// swapped for a pipe or a device between a check and the open is refused
// too.
func Open(path string, k Kind) (*os.File, os.FileInfo, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k.Name, err)
	} else if err := checkInfo(path, k, st); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k.Name, err)
	}
	st, err := f.Stat()
	if err == nil {
		err = checkInfo(path, k, st)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// Errors name the kind first ("image /x.png is a named pipe: ...",
// "image: stat /x.png: no such file or directory"), so callers need not
// add it.

// ReadFile reads the file at path whole as a file of kind k: a regular file
// of at most k.Max bytes (a file that grows past it while read is refused
// too).
func ReadFile(path string, k Kind) ([]byte, error) {
	f, _, err := Open(path, k)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := io.Reader(f)
	if k.Max > 0 {
		r = io.LimitReader(f, k.Max+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", k.Name, path, err)
	}
	if k.Max > 0 && int64(len(b)) > k.Max {
		return nil, sizeError(path, k, -1)
	}
	return b, nil
}

// Limit returns k with the size limit max when max is positive and lower
// than k's own (a caller's tighter limit).
func (k Kind) Limit(max int64) Kind {
	if max > 0 && (k.Max == 0 || max < k.Max) {
		k.Max = max
	}
	return k
}
