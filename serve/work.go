package serve

import (
	"fmt"
	"net/http"
	"time"
)

// workWait is how long CPU work before generation waits for a place.
const workWait = time.Minute

// work runs f, CPU work a request asks for before it generates (such as
// compiling a JSON schema), in one of the places Options.Parallel counts:
// it waits for a place as a request does (503 when the queue is full)
// and answers when f ends or, with an error naming what, once
// Options.WorkTimeout has passed; f keeps its place until it returns.
func (s *Server) work(what string, f func() *apiError) *apiError {
	p := s.pool
	if p == nil { // a Server made without New, as tests of its parts are
		return f()
	}
	if p.queued.Add(1) > p.limit {
		p.queued.Add(-1)
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_busy",
			Message: errBusy.Error() + "; retry later", RetryAfter: 1}
	}
	p.wait.Add(1)
	select {
	case p.sem <- struct{}{}:
		p.wait.Add(-1)
	case <-time.After(workWait):
		p.wait.Add(-1)
		p.queued.Add(-1)
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_busy",
			Message: fmt.Sprintf("no place to run %s within %v; retry later", what, workWait), RetryAfter: 1}
	}
	done := make(chan *apiError, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("%s failed: %v", what, v)}
			}
			<-p.sem
			p.queued.Add(-1)
		}()
		done <- f()
	}()
	t := time.NewTimer(s.opts.WorkTimeout)
	defer t.Stop()
	select {
	case e := <-done:
		return e
	case <-t.C:
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "work_timeout",
			Message: fmt.Sprintf("%s took longer than %v: make it simpler", what, s.opts.WorkTimeout)}
	}
}

// warmVocab computes the vocabulary's bytes the masks read (once), so
// that this work is done where work counts it.
func (s *Server) warmVocab() {
	if s.m != nil {
		s.tokenBytes()
	}
}
