package main

import (
	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/load"
)

// openOptions says how openModel opens a model (load.Options).
type openOptions = load.Options

// openModel opens MODEL as the runtime sees it (load.Open).
func openModel(path string, o openOptions) (*aotlm.Model, error) { return load.Open(path, o) }
