// Package limits is the one place that bounds what aotlm reads and builds
// from untrusted input: the size of files read as text, the budgets of
// tokenizer regexes and chat templates, and the memory a model may ask
// for. docs/formats.md lists every limit.
package limits

import (
	"errors"
	"fmt"
	"io"
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
	// MaxTokenizerNesting bounds the nesting of tokenizer.json components
	// (a Sequence of normalizers, pre-tokenizers, decoders or
	// post-processors inside another); published tokenizers nest two deep.
	MaxTokenizerNesting = 16
	// MaxNormalizedGrowth and MaxNormalizedSlack bound the text a
	// tokenizer.json normalizer makes: at most MaxNormalizedGrowth times
	// the input plus MaxNormalizedSlack bytes, checked before a Replace
	// builds its result.
	MaxNormalizedGrowth = 8
	MaxNormalizedSlack  = 4 << 10
	// MaxDecoderGrowth bounds how many times longer a tokenizer.json
	// decoder chain can make a token (its Replace steps multiplied
	// together), checked when the tokenizer loads.
	MaxDecoderGrowth = 16
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

// AllocError is a memory request larger than the process may take.
type AllocError struct {
	What      string // e.g. "a KV cache of 131072 positions"
	Bytes     int64  // the request
	Available int64  // what is left of the bound
	Bound     string // the bound that refused it ("MemAvailable", "cgroup memory.max", ...)
	Held      int64  // what the process's other reservations hold of the bound
	Holders   int    // their number
}

func (e *AllocError) Error() string {
	msg := fmt.Sprintf("%s needs %s, more than the %s of memory available", e.What, Bytes(e.Bytes), Bytes(e.Available))
	switch {
	case e.Holders == 1:
		msg += fmt.Sprintf(" (%s by %s, less %s held by another session of this process)", Bytes(e.Available+e.Held), e.Bound, Bytes(e.Held))
	case e.Holders > 1:
		msg += fmt.Sprintf(" (%s by %s, less %s held by %d sessions of this process)", Bytes(e.Available+e.Held), e.Bound, Bytes(e.Held), e.Holders)
	case e.Bound != "":
		msg += fmt.Sprintf(" (by %s)", e.Bound)
	}
	return msg
}

// MemoryEnv names the environment variable that caps the memory the
// process's requests may take, in bytes (with an optional K, M or G
// suffix, powers of 1024), below what the system reports.
const MemoryEnv = "AOTLM_MAX_MEMORY"

// CheckAlloc refuses a request of bytes for what when it exceeds the
// tightest bound the system reports now (see MemoryBounds: physical
// memory, the cgroup's limit, RLIMIT_AS) or $AOTLM_MAX_MEMORY less what the
// process's reservations hold. Where nothing is known, only requests that
// cannot be addressed (over 128 TiB) are refused. It reserves nothing: a
// size check before building something; Reserve holds memory.
func CheckAlloc(what string, bytes int64) error {
	b := tightest(MemoryBounds())
	capBytes, capSet, err := memoryEnvCap()
	if err != nil {
		return err
	}
	if held, n := Reserved(); capSet && capBytes-held < b.Bytes {
		b = MemoryBound{"$" + MemoryEnv, capBytes}
		if bytes < 0 || bytes > capBytes-held {
			return &AllocError{What: what, Bytes: bytes, Available: max(capBytes-held, 0), Bound: b.Name, Held: held, Holders: n}
		}
		return nil
	}
	return checkAlloc(what, bytes, b)
}

// ParseSize reads a byte count with an optional K, M or G suffix
// (binary: 4G is 4<<30).
func ParseSize(s string) (int64, error) {
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

func checkAlloc(what string, bytes int64, b MemoryBound) error {
	if bytes < 0 || bytes > b.Bytes {
		return &AllocError{What: what, Bytes: bytes, Available: b.Bytes, Bound: b.Name}
	}
	return nil
}

// Available returns the memory available for new allocations (the
// tightest of MemoryBounds), and false when the system does not say.
func Available() (int64, bool) {
	b := MemoryBounds()
	if len(b) == 0 {
		return 0, false
	}
	return b[0].Bytes, true
}

// parseMemAvailable reads the MemAvailable line of /proc/meminfo.
func parseMemAvailable(r io.Reader) (int64, bool) {
	return parseKBLine(r, "MemAvailable:")
}
