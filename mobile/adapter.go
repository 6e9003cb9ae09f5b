package mobile

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/modelparts"
)

// LoadAdapter loads the low-rank (LoRA or DoRA) adapter at path, a PEFT
// folder or a llama.cpp GGUF adapter trained on the model's base, under
// name (replacing an adapter of that name), with scale folded in: a chat
// choosing it at scale 1 applies it at scale. storage is how its
// matrices are held: "f16" (binary16, also for ""), "f32" (exact) or
// "q8" (8 bits with a scale per row, half the memory of binary16). The
// base weights do not change; a chat chooses the adapter with
// Chat.SetAdapter.
func (m *Model) LoadAdapter(name, path string, scale float64, storage string) error {
	st, err := adapterStorage(storage)
	if err != nil {
		return err
	}
	if name == "" {
		return errors.New("an adapter needs a name")
	}
	e := modelparts.Engine(m.m)
	if e == nil {
		return aotlm.ErrNoAdapters
	}
	_, err = lora.ForEngine(e, name, path, scale, st)
	return err
}

// adapterStorage reads LoadAdapter's storage.
func adapterStorage(s string) (engine.AdapterStorage, error) {
	for _, st := range []engine.AdapterStorage{engine.AdapterF16, engine.AdapterF32, engine.AdapterQ8} {
		if s == st.String() {
			return st, nil
		}
	}
	if s == "" {
		return engine.AdapterF16, nil
	}
	return 0, fmt.Errorf("adapter storage %q: want f16, f32 or q8", s)
}

// AdaptersJSON lists the names of the loaded adapters (those the artifact
// carries and those loaded since) as a JSON array of strings, sorted.
func (m *Model) AdaptersJSON() string {
	names := m.m.Adapters()
	if names == nil {
		names = []string{}
	}
	b, _ := json.Marshal(names)
	return string(b)
}

// RemoveAdapter unloads the named adapter and reports whether it was
// loaded; chats that chose it keep it until they choose again.
func (m *Model) RemoveAdapter(name string) bool { return m.m.RemoveAdapter(name) }

// SetAdapter makes the chat's next replies apply the named adapter at
// scale (1: as loaded); "" applies none. A change makes the next Send
// read the whole conversation again, with the new choice.
func (c *Chat) SetAdapter(name string, scale float64) error {
	return c.c.Session().SetAdapter(name, scale)
}

// Adapter returns the name of the adapter the chat applies ("" for none).
func (c *Chat) Adapter() string {
	name, _ := c.c.Session().Adapter()
	return name
}

// AdapterScale returns the scale at which the chat applies its adapter
// (0 for none).
func (c *Chat) AdapterScale() float64 {
	_, scale := c.c.Session().Adapter()
	return scale
}
