package load

import (
	"os"

	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/userfile"
)

// CheckInputs refuses, before a command reads anything, counts outside
// what the machine bounds (limits.MaxThreads, limits.MaxParallel) and
// model paths that are named pipes, devices or sockets, which opening
// would block on or read without end. counts maps a flag ("-t", "--jobs",
// "--parallel") to the value given; "--parallel" is a session count, the
// others thread counts.
func CheckInputs(counts map[string]int, models []string) error {
	for flag, n := range counts {
		check := limits.CheckThreads
		if flag == "--parallel" {
			check = limits.CheckParallel
		}
		if err := check(flag, n); err != nil {
			return err
		}
	}
	for _, m := range models {
		if err := userfile.CheckModel(m); err != nil {
			return err
		}
	}
	return nil
}

// ReadText reads a text file the user named (a prompt, a data file)
// within the text size limit; what names it in errors.
func ReadText(path, what string) ([]byte, error) {
	return userfile.ReadFile(path, userfile.Text.Named(what))
}

// OpenText opens a text file the user named, as ReadText reads one.
func OpenText(path, what string) (*os.File, error) {
	f, _, err := userfile.Open(path, userfile.Text.Named(what))
	return f, err
}
