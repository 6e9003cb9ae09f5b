package artifact

import (
	"errors"
	"fmt"
)

// ErrNotFound is wrapped by the error Tensor and Blob return for a name the
// artifact does not hold.
var ErrNotFound = errors.New("not found")

// FormatError reports a malformed or corrupt artifact. Section names the
// part at fault: "header", "section table", "file", or a section name such
// as "manifest", "tensor-index", "weights" or "plan/ar32".
type FormatError struct {
	File    string // path of the artifact, or "" when opened from a reader
	Section string
	Msg     string
}

func (e *FormatError) Error() string {
	s := "artifact"
	if e.File != "" {
		s += " " + e.File
	}
	if e.Section != "" {
		s += ": " + e.Section
	}
	return s + ": " + e.Msg
}

// VersionError reports an artifact written by a newer format version.
type VersionError struct {
	File      string
	Version   uint32 // version recorded in the file
	Supported uint32 // newest version this package reads
}

func (e *VersionError) Error() string {
	s := "artifact"
	if e.File != "" {
		s += " " + e.File
	}
	return fmt.Sprintf("%s: artifact format version %d is newer than this aotlm supports (%d); rebuild it or upgrade aotlm",
		s, e.Version, e.Supported)
}

// CPUFeatureError reports an artifact compiled for CPU features this
// machine lacks.
type CPUFeatureError struct {
	File     string
	Required Features // features the artifact needs
	Missing  Features // the subset this machine lacks
	Host     Features // features detected on this machine
	Arch     string   // this machine's GOARCH
}

func (e *CPUFeatureError) Error() string {
	s := "artifact"
	if e.File != "" {
		s += " " + e.File
	}
	return fmt.Sprintf("%s: needs CPU features this machine lacks: %v (this machine: %s, has %v); recompile it for this machine",
		s, e.Missing, e.Arch, e.Host)
}

// formatErr returns a *FormatError for section with a formatted message.
func formatErr(file, section, f string, args ...any) *FormatError {
	return &FormatError{File: file, Section: section, Msg: fmt.Sprintf(f, args...)}
}
