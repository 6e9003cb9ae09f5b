package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/aotlm/aotlm/internal/output"
)

// cleanupSignals are the signals that remove the temporary files and
// locks of outputs being written before the process exits: an interrupt
// (Ctrl-C), a termination, a closed terminal (SIGHUP) and Ctrl-\ (SIGQUIT).
var cleanupSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// removeTempsOnSignal makes the cleanupSignals remove the temporary files
// and folders of outputs being written and their locks (see output.Track)
// before the process exits with 128 plus the signal's number (130 for
// SIGINT, 143 for SIGTERM), as a shell reports a command a signal ended.
func removeTempsOnSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, cleanupSignals...)
	go func() {
		s := <-sig
		output.RemoveTracked()
		code := 128 + 2
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		os.Exit(code)
	}()
}
