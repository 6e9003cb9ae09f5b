package aotlm

import (
	"errors"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/engine"
)

// ErrNoAdapters is returned for adapters on a model that is not a
// compiled artifact.
var ErrNoAdapters = errors.New("low-rank adapters apply to compiled artifacts only")

// Adapters returns the names of the low-rank (LoRA) adapters loaded in
// the model, sorted: those the artifact carries and those added since
// (aotlm's run, chat and serve add them from PEFT folders and GGUF
// adapters). A session chooses one with SetAdapter.
func (m *Model) Adapters() []string {
	if m.eng == nil {
		return nil
	}
	return m.eng.Adapters()
}

// RemoveAdapter unloads the named adapter: sessions that chose it keep
// it until they choose again. It reports whether it was loaded.
func (m *Model) RemoveAdapter(name string) bool {
	if m.eng == nil {
		return false
	}
	return m.eng.RemoveAdapter(name)
}

// SetAdapter makes the session apply the named adapter, at scale (1 is
// the adapter as trained), beside the model's linears from its next pass
// on; "" applies none. The base weights are not changed, and sessions of
// one model with different adapters still share their decode passes. A
// change empties the session: its cache was computed with the previous
// choice.
func (s *Session) SetAdapter(name string, scale float64) error {
	es, ok := s.seq.(*engine.Session)
	if !ok || s.m.eng == nil {
		if name == "" {
			return nil
		}
		return ErrNoAdapters
	}
	var ad *engine.Adapter
	if name != "" {
		if ad = s.m.eng.LookupAdapter(name); ad == nil {
			return fmt.Errorf("no adapter named %q is loaded (loaded: %v)", name, s.m.eng.Adapters())
		}
		if math.IsNaN(scale) || math.IsInf(scale, 0) {
			return fmt.Errorf("adapter %q: scale %v is not a finite number", name, scale)
		}
	} else {
		scale = 0
	}
	if cur, cs := es.Adapter(); cur == ad && float64(cs) == float64(float32(scale)) {
		return nil
	}
	if err := es.SetAdapter(ad, float32(scale)); err != nil {
		return err
	}
	return s.Reset()
}

// Adapter returns the name and scale of the session's adapter ("" when
// it applies none).
func (s *Session) Adapter() (string, float64) {
	es, ok := s.seq.(*engine.Session)
	if !ok {
		return "", 0
	}
	ad, scale := es.Adapter()
	if ad == nil {
		return "", 0
	}
	return ad.Name(), float64(scale)
}
