package load

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/modelparts"
)

// AdapterSpec is a run-time adapter named on a command line:
// [NAME=]PATH[:SCALE]. NAME defaults to PATH's base name without
// ".gguf".
type AdapterSpec = lora.Named

// ParseAdapter reads [NAME=]PATH[:SCALE].
func ParseAdapter(v string) (AdapterSpec, error) {
	var a AdapterSpec
	if name, rest, ok := strings.Cut(v, "="); ok && name != "" && !strings.ContainsAny(name, `/\:`) {
		a.Name, v = name, rest
	}
	sp, err := lora.ParseSpec(v)
	if err != nil {
		return a, fmt.Errorf("--lora: %w", err)
	}
	a.Spec = sp
	if a.Name == "" {
		a.Name = strings.TrimSuffix(filepath.Base(filepath.Clean(sp.Path)), ".gguf")
	}
	return a, nil
}

// ParseAdapters reads several [NAME=]PATH[:SCALE] (compile's --adapter).
func ParseAdapters(values []string) ([]AdapterSpec, error) {
	var out []AdapterSpec
	for _, v := range values {
		a, err := ParseAdapter(v)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// AdapterStorage is how run-time adapters hold their matrices:
// binary16 (the default), float32 or 8 bits.
type AdapterStorage = engine.AdapterStorage

// StorageOf returns the storage the flags --lora-f32 and --lora-q8
// choose (binary16 when neither); both is an error.
func StorageOf(f32, q8 bool) (AdapterStorage, error) {
	switch {
	case f32 && q8:
		return 0, errors.New("--lora-f32 and --lora-q8: choose one storage for run-time adapters")
	case f32:
		return engine.AdapterF32, nil
	case q8:
		return engine.AdapterQ8, nil
	}
	return engine.AdapterF16, nil
}

// AddAdapter loads the adapter of spec into m under spec.Name, its
// scale folded in (so that choosing it at scale 1 applies it at
// spec.Scale), its matrices held as storage says. m must be a compiled
// artifact's model.
func AddAdapter(m *aotlm.Model, spec AdapterSpec, storage AdapterStorage) error {
	e := modelparts.Engine(m)
	if e == nil {
		return fmt.Errorf("--lora %s: %w (drop --no-compile)", spec.Path, aotlm.ErrNoAdapters)
	}
	_, err := lora.ForEngine(e, spec.Name, spec.Path, spec.Scale, storage)
	return err
}

// AddAdapters parses values ([NAME=]PATH[:SCALE] each) and loads them
// into m, held as storage says; it returns the first one's name ("" when
// there are none), the adapter run and chat apply.
func AddAdapters(m *aotlm.Model, values []string, storage AdapterStorage) (string, error) {
	first := ""
	for i, v := range values {
		a, err := ParseAdapter(v)
		if err == nil {
			err = AddAdapter(m, a, storage)
		}
		if err != nil {
			return "", err
		}
		if i == 0 {
			first = a.Name
		}
	}
	return first, nil
}

// errOneAdapter refuses several --lora for a command with one session.
var errOneAdapter = errors.New("--lora: a run applies one adapter: merge several with compile --lora")

// ChooseAdapter makes s apply the adapter of the first --lora value
// (none when values is empty): one the artifact carries, named
// NAME[:SCALE], or one it loads into s's model from its path; with
// several, the others are loaded too (chat switches with /adapter),
// unless one is all the command takes.
func ChooseAdapter(s *aotlm.Session, values []string, storage AdapterStorage, several bool) error {
	if len(values) > 1 && !several {
		return errOneAdapter
	}
	if len(values) == 1 {
		// the name of an adapter the artifact carries, at a scale
		if sp, err := lora.ParseSpec(values[0]); err == nil && slices.Contains(s.Model().Adapters(), sp.Path) {
			if _, err := os.Stat(sp.Path); err != nil {
				return s.SetAdapter(sp.Path, sp.Scale)
			}
		}
	}
	name, err := AddAdapters(s.Model(), values, storage)
	if err != nil || name == "" {
		return err
	}
	return s.SetAdapter(name, 1)
}

// AdapterLoader returns the function serve's POST /v1/adapters loads an
// adapter with (serve.Options.LoadAdapter), held as storage says.
func AdapterLoader(storage AdapterStorage) func(m *aotlm.Model, name, path string, scale float64) error {
	return func(m *aotlm.Model, name, path string, scale float64) error {
		return AddAdapter(m, AdapterSpec{Name: name, Spec: lora.Spec{Path: path, Scale: scale}}, storage)
	}
}

// BenchAdapter returns bench's hook (bench.Config.Adapter) that loads the
// adapter of value ([NAME=]PATH[:SCALE]) into the engine, held as
// storage says; nil for "".
func BenchAdapter(value string, storage AdapterStorage) (func(e *engine.Engine) (*engine.Adapter, float32, error), error) {
	if value == "" {
		return nil, nil
	}
	a, err := ParseAdapter(value)
	if err != nil {
		return nil, err
	}
	return func(e *engine.Engine) (*engine.Adapter, float32, error) {
		ad, err := lora.ForEngine(e, a.Name, a.Path, a.Scale, storage)
		return ad, 1, err
	}, nil
}

// SwitchAdapter makes s apply the loaded adapter arg names
// (NAME[:SCALE]; "" for none), as chat's /adapter does; the session is
// emptied when the choice changes.
func SwitchAdapter(s *aotlm.Session, arg string) error {
	if arg == "" {
		return s.SetAdapter("", 0)
	}
	sp, err := lora.ParseSpec(arg)
	if err != nil {
		return err
	}
	return s.SetAdapter(sp.Path, sp.Scale)
}
