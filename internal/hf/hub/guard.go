package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// DefaultReadTimeout is how long a request may go without receiving a
// byte (headers or body) before it fails.
const DefaultReadTimeout = 60 * time.Second

// ErrStalled is wrapped by the error of a request the server stopped
// answering for the read timeout.
var ErrStalled = errors.New("the server sent nothing")

// stallGuard cancels a request when no byte of it arrives for d.
type stallGuard struct {
	d     time.Duration
	timer *time.Timer
	fired atomic.Bool
}

// guard returns a context that is cancelled when the request made with it
// receives nothing for d (reset by each read of its body through
// g.body), the guard, and the function that releases both.
func guard(ctx context.Context, d time.Duration) (context.Context, *stallGuard, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	g := &stallGuard{d: d}
	g.timer = time.AfterFunc(d, func() {
		g.fired.Store(true)
		cancel()
	})
	return ctx, g, func() {
		g.timer.Stop()
		cancel()
	}
}

// err names a stall as the cause of err when the guard fired.
func (g *stallGuard) err(err error) error {
	if err != nil && g.fired.Load() {
		return fmt.Errorf("%w for %v", ErrStalled, g.d)
	}
	return err
}

// body wraps a response body so that each read that brings bytes restarts
// the timeout.
func (g *stallGuard) body(r io.Reader) io.Reader { return guardedReader{r, g} }

type guardedReader struct {
	r io.Reader
	g *stallGuard
}

func (r guardedReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.g.timer.Reset(r.g.d)
	}
	return n, r.g.err(err)
}

// sameOrigin reports whether u has the endpoint's scheme and host (port
// included): the only place the token is sent.
func (c *Client) sameOrigin(u *url.URL) bool {
	e, err := url.Parse(c.opts.Endpoint)
	return err == nil && u != nil && u.Scheme == e.Scheme && u.Host == e.Host
}

// redirectPolicy drops the token from a redirect that leaves the endpoint
// (a file host, or anywhere a server redirects to) and stops after 10
// redirects; seen, when set, is called with each redirect first.
func (c *Client) redirectPolicy(seen func(r *http.Request)) func(r *http.Request, via []*http.Request) error {
	return func(r *http.Request, via []*http.Request) error {
		if seen != nil {
			seen(r)
		}
		if len(via) >= 10 {
			return errors.New("too many redirects")
		}
		if !c.sameOrigin(r.URL) {
			r.Header.Del("Authorization")
		}
		return nil
	}
}
