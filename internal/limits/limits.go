// Package limits is the one place that bounds what aotlm reads and builds
// from untrusted input: the size of files read as text, the budgets of
// tokenizer regexes and chat templates, and the memory a model may ask
// for. docs/formats.md lists every limit.
package limits

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Sizes of files read whole into memory.
const (
	// MaxTextFile bounds a text file: a prompt, a message list, evaluation
	// or calibration text.
	MaxTextFile = 64 << 20
	// MaxTokenizerFile bounds a tokenizer file (tokenizer.json,
	// SentencePiece model, tiktoken ranks, vocab.json, merges.txt, a
	// llama2.c tokenizer.bin); the largest published ones are ~35 MB.
	MaxTokenizerFile = 64 << 20
	// MaxConfigFile bounds a JSON configuration file (config.json,
	// tokenizer_config.json with its chat template, generation_config.json,
	// a quantized folder's manifest).
	MaxConfigFile = 16 << 20
)

// Budgets of untrusted text processing.
const (
	// RegexMatchTimeout bounds one match of a tokenizer's regex (a
	// pre-tokenizer Split or a normalizer Replace pattern that is not one of
	// the built-in ones).
	RegexMatchTimeout = 2 * time.Second
	// MaxTemplateSource bounds the source of a chat template.
	MaxTemplateSource = 1 << 20
	// MaxTemplateDepth bounds the nesting of a chat template: brackets and
	// blocks in its source, and macro calls while it renders.
	MaxTemplateDepth = 100
	// MaxTemplateIterations bounds the loop iterations of one render, all
	// loops together (each loop is charged its length when it starts), and
	// the length of a range().
	MaxTemplateIterations = 100_000
	// MaxTemplateOutput bounds a render's output and any string or list a
	// template builds (in bytes and elements).
	MaxTemplateOutput = 16 << 20
	// MaxTemplateTime bounds the time of one render.
	MaxTemplateTime = 10 * time.Second
)

// Error is a limit that was reached. Its message names the limit.
type Error struct {
	What  string // what went over, e.g. "prompt file x.txt"
	Limit string // the limit's name and value, e.g. "MaxTextFile (64 MiB)"
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s exceeds the limit %s", e.What, e.Limit)
}

// IsLimit reports whether err is (or wraps) a limit being reached.
func IsLimit(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Bytes formats n as a size in KiB, MiB or GiB.
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadFile reads the file at path whole, refusing more than max bytes.
// what describes the file in errors ("prompt file", "tokenizer"). A named
// pipe or a device is read like a file, up to the limit, so /dev/zero ends
// in an error rather than in an exhausted memory.
func ReadFile(path, what string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s %s is a folder, not a file", what, path)
	} else if err == nil && st.Mode().IsRegular() && st.Size() > max {
		return nil, &Error{What: fmt.Sprintf("%s %s (%s)", what, path, Bytes(st.Size())), Limit: Bytes(max)}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &Error{What: fmt.Sprintf("%s %s", what, path), Limit: Bytes(max)}
	}
	return b, nil
}

// CheckInput refuses a model path that is neither a regular file nor a
// folder (a named pipe, a device, a socket), which opening or mapping would
// block on or misread. A missing path is left to the caller's open.
func CheckInput(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		return fmt.Errorf("%s is not a regular file or a folder (%s)", path, kind(st.Mode()))
	}
	return nil
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

// AllocError is a memory request larger than the machine can give.
type AllocError struct {
	What      string // e.g. "a KV cache of 131072 positions"
	Bytes     int64  // the request
	Available int64  // what the machine reports available
}

func (e *AllocError) Error() string {
	return fmt.Sprintf("%s needs %s, more than the %s of memory available", e.What, Bytes(e.Bytes), Bytes(e.Available))
}

// MemoryEnv names the environment variable that caps the memory CheckAlloc
// lets a request take, in bytes (with an optional K, M or G suffix, powers
// of 1024), below what the machine reports.
const MemoryEnv = "AOTLM_MAX_MEMORY"

// CheckAlloc refuses a request of bytes for what when it exceeds the memory
// the machine has available (MemAvailable of /proc/meminfo on Linux and
// Android), or $AOTLM_MAX_MEMORY when that is lower. Where neither is
// known, only requests that cannot be addressed (over 128 TiB) are refused.
func CheckAlloc(what string, bytes int64) error {
	avail, ok := Available()
	if !ok {
		avail = 1 << 47
	}
	if v := os.Getenv(MemoryEnv); v != "" {
		cap, err := parseSize(v)
		if err != nil {
			return fmt.Errorf("$%s: %w", MemoryEnv, err)
		}
		avail = min(avail, cap)
	}
	return checkAlloc(what, bytes, avail)
}

// ParseSize reads a byte count with an optional K, M or G suffix ("4G").
func ParseSize(s string) (int64, error) { return parseSize(s) }

// parseSize reads a byte count with an optional K, M or G suffix.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size in bytes (such as 4G)", s)
	}
	return n * mult, nil
}

func checkAlloc(what string, bytes, avail int64) error {
	if bytes < 0 || bytes > avail {
		return &AllocError{What: what, Bytes: bytes, Available: avail}
	}
	return nil
}

// Available returns the memory available for new allocations, and false
// when the system does not say.
func Available() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseMemAvailable(f)
}

// parseMemAvailable reads the MemAvailable line of /proc/meminfo.
func parseMemAvailable(r io.Reader) (int64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
