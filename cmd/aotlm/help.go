package main

import (
	"embed"
	"strings"
)

// helpFiles hold the commands' long help, one text file a command.
//
//go:embed help/*.txt
var helpFiles embed.FS

// help is the long help of command name (help/NAME.txt).
func help(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic("no help text for " + name) // a file of this package is missing
	}
	return strings.TrimRight(string(b), "\n")
}
