package aotlm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrStateUnsupported is returned when a session's backend cannot save or
// load its state.
var ErrStateUnsupported = errors.New("this model's sessions cannot save or load their state")

// stateSaver is a Sequence that can write its committed state and read
// it back (the engine's sessions).
type stateSaver interface {
	SaveState(w io.Writer) error
	LoadState(r io.Reader) error
}

// sessionMagic opens a state written by Session.SaveState.
const sessionMagic = "AOTLMSES"

// maxSessionHeader bounds the header of a saved session (its ids).
const maxSessionHeader = 64 << 20

// sessionHeader identifies the model a saved session belongs to and holds
// the ids its cache holds.
type sessionHeader struct {
	Architecture string `json:"architecture"`
	Vocab        int    `json:"vocab"`
	KVCache      string `json:"kv_cache"`
	IDs          []int  `json:"ids"`
}

// SaveState writes the session to w: the ids it holds and its cache (the
// attention rows and any recurrent state), for LoadState to read back
// into a session of the same model, in this process or a later one. A
// conversation continued after the load prefills only what it adds.
func (s *Session) SaveState(w io.Writer) error {
	sv, ok := s.seq.(stateSaver)
	if !ok {
		return ErrStateUnsupported
	}
	info := s.m.Info()
	h, err := json.Marshal(sessionHeader{Architecture: info.Architecture, Vocab: info.Vocab, KVCache: info.KVCache, IDs: s.hist})
	if err != nil {
		return fmt.Errorf("saving a session: %w", err)
	}
	if _, err := io.WriteString(w, sessionMagic); err != nil {
		return fmt.Errorf("saving a session: %w", err)
	}
	if err := binary.Write(w, binary.LittleEndian, uint32(len(h))); err != nil {
		return fmt.Errorf("saving a session: %w", err)
	}
	if _, err := w.Write(h); err != nil {
		return fmt.Errorf("saving a session: %w", err)
	}
	if err := sv.SaveState(w); err != nil {
		return fmt.Errorf("saving a session: %w", err)
	}
	return nil
}

// LoadState replaces the session's contents with a session SaveState
// wrote. A state of another model, one longer than the session's
// context, or damaged data is refused, and the session is then empty.
func (s *Session) LoadState(r io.Reader) error {
	sv, ok := s.seq.(stateSaver)
	if !ok {
		return ErrStateUnsupported
	}
	if err := s.loadState(sv, r); err != nil {
		s.Reset()
		return fmt.Errorf("loading a session: %w", err)
	}
	return nil
}

func (s *Session) loadState(sv stateSaver, r io.Reader) error {
	magic := make([]byte, len(sessionMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != sessionMagic {
		return fmt.Errorf("the data does not start with %q: not a saved session", sessionMagic)
	}
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return fmt.Errorf("the header ends early: %w", err)
	}
	if n > maxSessionHeader {
		return fmt.Errorf("a header of %d bytes: at most %d", n, maxSessionHeader)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("the header ends early: %w", err)
	}
	var h sessionHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("the header: %w", err)
	}
	info := s.m.Info()
	if h.Architecture != info.Architecture || h.Vocab != info.Vocab || h.KVCache != info.KVCache {
		return fmt.Errorf("the state is of a %s model with %d ids and a %s cache; this one is %s with %d ids and a %s cache",
			h.Architecture, h.Vocab, h.KVCache, info.Architecture, info.Vocab, info.KVCache)
	}
	if len(h.IDs) > s.seq.Context() {
		return fmt.Errorf("the state holds %d positions; the session's context is %d", len(h.IDs), s.seq.Context())
	}
	for i, id := range h.IDs {
		if id < EmbedBase && (id < 0 || id >= info.Vocab) {
			return fmt.Errorf("id %d at position %d is outside the vocabulary", id, i)
		}
	}
	if err := sv.LoadState(r); err != nil {
		return err
	}
	if p := s.seq.Pos(); p != len(h.IDs) {
		return fmt.Errorf("the cache holds %d positions and the header %d ids", p, len(h.IDs))
	}
	s.hist = append(s.hist[:0], h.IDs...)
	return nil
}

// MemoryBytes is the memory the session holds besides the model's
// weights: its cache, activations and recurrent state (0 when its
// backend does not say).
func (s *Session) MemoryBytes() int64 {
	if mb, ok := s.seq.(interface{ MemoryBytes() int64 }); ok {
		return mb.MemoryBytes()
	}
	return 0
}
