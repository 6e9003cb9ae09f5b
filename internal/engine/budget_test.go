package engine_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/limits"
)

// TestSessionsShareOneMemoryBudget: the sessions of every engine in the
// process count against one budget. With $AOTLM_MAX_MEMORY at two and a
// half sessions, two sessions open (one on each of two engines) and the
// third is refused naming what the other two hold; closing one makes
// room, and a session dropped without Close gives its share back once
// collected.
func TestSessionsShareOneMemoryBudget(t *testing.T) {
	m := tinyModel(t)
	a, b := compileModel(t, m, 256, 1), compileModel(t, m, 256, 1)
	held0, _ := limits.Reserved()
	s1, err := a.NewSession(engine.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	held1, _ := limits.Reserved()
	need := held1 - held0
	if need <= 0 {
		t.Fatalf("a session reserved %d bytes", need)
	}
	t.Setenv(limits.MemoryEnv, fmt.Sprint(held0+need*5/2))
	s2, err := b.NewSession(engine.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatalf("second session: %v", err)
	}
	_, err = a.NewSession(engine.SessionOptions{Threads: 1})
	var ae *limits.AllocError
	if !errors.As(err, &ae) || ae.Holders < 2 || !strings.Contains(err.Error(), limits.MemoryEnv) {
		t.Fatalf("third session: %v", err)
	}
	s1.Close()
	s3, err := b.NewSession(engine.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatalf("after a Close: %v", err)
	}
	s3.Close()
	s2 = nil // dropped without Close
	_ = s2
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		if held, _ := limits.Reserved(); held == held0 {
			break
		}
		if time.Now().After(deadline) {
			held, n := limits.Reserved()
			t.Fatalf("an unclosed, unreachable session still holds its share: %d bytes in %d reservations", held-held0, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
