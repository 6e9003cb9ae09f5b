package serve

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// slotRequest is the body of POST /slots/{id}.
type slotRequest struct {
	Filename string `json:"filename"`
}

// handleSlot answers POST /slots/{id}?action=save|restore|erase
// (llama-server's shape): save writes session id's cache to a file of
// Options.SlotSaveDir, restore reads one back into the session, and
// erase empties it. A request may save only a session that holds its own
// cache (its API key's or client address's, see Options.SharedCache); a
// restored session becomes the requester's, so its next request that
// continues the saved conversation prefills only what it adds.
func (s *Server) handleSlot(w http.ResponseWriter, r *http.Request) *apiError {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 || id >= len(s.pool.slots) {
		return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no slot %q: the slots are 0 to %d", r.PathValue("id"), len(s.pool.slots)-1)}
	}
	action := r.URL.Query().Get("action")
	var req slotRequest
	if action == "save" || action == "restore" {
		if s.opts.SlotSaveDir == "" {
			return badRequest("", "saving and restoring slots is off: start the server with --slot-save-path DIR")
		}
		if e := decodeBody(r, &req); e != nil {
			return e
		}
		if e := checkSlotFile(req.Filename); e != nil {
			return e
		}
	} else if action != "erase" {
		return badRequest("action", "action %q: want save, restore or erase", action)
	}
	sl, ok := s.pool.take(id)
	if !ok {
		return &apiError{Status: http.StatusConflict, Type: "invalid_request_error", Code: "slot_busy",
			Message: fmt.Sprintf("slot %d is generating: retry when it is done", id), RetryAfter: 1}
	}
	defer s.pool.release(sl)
	scope := scopeOf(r.Context())
	path := filepath.Join(s.opts.SlotSaveDir, req.Filename)
	start := time.Now()
	switch action {
	case "erase":
		n := len(sl.s.History())
		if sl.scope != scope && n > 0 {
			return slotNotYours(id)
		}
		if err := sl.s.Reset(); err != nil {
			return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "emptying the slot: " + err.Error()}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "n_erased": n})
	case "save":
		n := len(sl.s.History())
		if sl.scope != scope && n > 0 {
			return slotNotYours(id)
		}
		size, err := saveSlot(sl, path)
		if err != nil {
			return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename, "n_saved": n, "n_written": size,
			"timings": map[string]float64{"save_ms": ms(time.Since(start).Seconds())}})
	case "restore":
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
				Message: fmt.Sprintf("no saved slot %q", req.Filename)}
		} else if err != nil {
			return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "reading the saved slot: " + err.Error()}
		}
		defer f.Close()
		st, _ := f.Stat()
		sl.scope = scope
		if err := sl.s.LoadState(f); err != nil {
			return badRequest("filename", "%s: %v", req.Filename, err)
		}
		var size int64
		if st != nil {
			size = st.Size()
		}
		writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename, "n_restored": len(sl.s.History()),
			"n_read": size, "timings": map[string]float64{"restore_ms": ms(time.Since(start).Seconds())}})
	}
	return nil
}

func slotNotYours(id int) *apiError {
	return &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "slot_not_yours",
		Message: fmt.Sprintf("slot %d holds another client's conversation", id)}
}

// checkSlotFile accepts a plain file name (no folder, not hidden).
func checkSlotFile(name string) *apiError {
	if name == "" || name != filepath.Base(name) || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") || len(name) > 200 {
		return badRequest("filename", "filename %q: want a plain file name (no folder, not starting with a dot, at most 200 bytes)", name)
	}
	return nil
}

// saveSlot writes sl's session to path through a temporary file renamed
// over it, so that a failed save leaves the old file whole; it returns
// the bytes written.
func saveSlot(sl *slot, path string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".slot-*")
	if err != nil {
		return 0, fmt.Errorf("saving the slot: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := sl.s.SaveState(tmp); err != nil {
		tmp.Close()
		return 0, fmt.Errorf("saving the slot: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return 0, fmt.Errorf("saving the slot: %w", err)
	}
	st, err := tmp.Stat()
	if err != nil {
		tmp.Close()
		return 0, fmt.Errorf("saving the slot: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("saving the slot: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("saving the slot: %w", err)
	}
	return st.Size(), nil
}

// take hands out slot id if it is free, as acquire would (it counts in
// the queue's limit); false when it is generating or the queue is full.
func (p *pool) take(id int) (*slot, bool) {
	if p.queued.Add(1) > p.limit {
		p.queued.Add(-1)
		return nil, false
	}
	select {
	case p.sem <- struct{}{}:
	default:
		p.queued.Add(-1)
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, sl := range p.free {
		if sl == p.slots[id] {
			p.free = append(p.free[:i], p.free[i+1:]...)
			return sl, true
		}
	}
	<-p.sem
	p.queued.Add(-1)
	return nil, false
}
