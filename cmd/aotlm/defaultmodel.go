package main

import (
	"fmt"
	"io"

	"github.com/aotlm/aotlm/internal/load"
)

// resolveModel returns the model a command should load: flag when the user
// gave one, else the demo model built into the binary, unpacked once into
// the cache folder ($AOTLM_CACHE/demo), after a one-line note on stderr
// saying which model this is and how to use a real one.
func resolveModel(flag string, stderr io.Writer) (string, error) {
	if flag != "" {
		return flag, nil
	}
	path, err := load.Demo()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "aotlm: no model given, using the built-in demo %s; for a real model pass -m <model file, folder or org/name>\n", load.DemoAbout)
	return path, nil
}

// lineTracker passes writes through and remembers whether the output ends
// in the middle of a line, so a status line written to another stream
// (stderr) can start on a line of its own.
type lineTracker struct {
	w      io.Writer
	inLine bool
}

func (t *lineTracker) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if n > 0 {
		t.inLine = p[n-1] != '\n'
	}
	return n, err
}

// endLine ends an unfinished line with a newline.
func (t *lineTracker) endLine() {
	if t.inLine {
		io.WriteString(t.w, "\n")
		t.inLine = false
	}
}
