// Package demo carries a small real model inside the binary, so aotlm runs
// with nothing but itself: stories260K, Andrej Karpathy's 260K-parameter
// llama2.c model trained on TinyStories, as a GGUF file with its tokenizer
// (MIT license; see LICENSE and PROVENANCE.md in this folder).
//
// The model readers open files (they mmap them), so Path writes the
// embedded bytes once into a folder, under a name that carries their
// sha256, and returns that file's path. Building with the nodemo tag
// leaves the model out (1.2 MB less).
package demo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Name is the demo model's name.
const Name = "stories260K"

// About describes the demo model in one phrase, for a note to the user.
const About = "stories260K, Andrej Karpathy's 260K-parameter TinyStories model (llama2.c, MIT license)"

// SHA256 is the hex sha256 of the embedded GGUF file.
const SHA256 = "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"

// Available reports whether this build carries the demo model (a build
// with the nodemo tag does not).
func Available() bool { return len(gguf) > 0 }

// GGUF returns the embedded model file (nil in a nodemo build). The slice
// is shared: do not modify it.
func GGUF() []byte { return gguf }

// License returns the model's license text (MIT, Copyright (c) 2023 Andrej
// Karpathy), which Path writes next to the model file.
func License() string { return license }

// FileName is the name Path gives the model file: the model's name and the
// first 16 hex digits of its sha256, so a different model never takes the
// place of another.
func FileName() string { return Name + "-" + SHA256[:16] + ".gguf" }

// Path returns the path of the demo model's GGUF file in dir, creating dir
// and writing the file (and its license beside it) when the file is
// missing or its content differs from the embedded one. Files are written
// to a temporary name and renamed into place, so a reader never sees a
// partial file, and concurrent callers are safe.
func Path(dir string) (string, error) {
	if !Available() {
		return "", errors.New("demo model: this build does not include it (built with the nodemo tag)")
	}
	path := filepath.Join(dir, FileName())
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, gguf) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	if err := writeAtomic(path+".LICENSE", []byte(license)); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	if err := writeAtomic(path, gguf); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	return path, nil
}

// writeAtomic writes data to a temporary file in path's folder and renames
// it to path.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
