package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/aotlm/aotlm/internal/output"
)

// removeTempsOnSignal makes SIGINT and SIGTERM remove the temporary files
// and folders of outputs being written (see output.Track) before the
// process exits with 130 (SIGINT) or 143 (SIGTERM), as a shell reports a
// command it interrupted.
func removeTempsOnSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		output.RemoveTracked()
		if s == syscall.SIGTERM {
			os.Exit(143)
		}
		os.Exit(130)
	}()
}
