package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// shutdownGrace is how long requests in flight may take to finish once
// the serving context is done.
const shutdownGrace = 10 * time.Second

// Serve answers HTTP on ln until ctx is done, then lets the requests in
// flight finish for up to ten seconds and returns nil. log, when not nil,
// is told when the server shuts down. The caller closes the Server after.
func (s *Server) Serve(ctx context.Context, ln net.Listener, log io.Writer) error {
	return serveHTTP(ctx, ln, s.Handler(), log)
}

// netListener is the listener Serve takes.
type netListener = net.Listener

// serveHTTP answers HTTP on ln with h as Server.Serve describes.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, log io.Writer) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if log != nil {
		fmt.Fprintln(log, "shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	hs.Close()
	return nil
}

// ListenAndServe listens on addr ("127.0.0.1:8080"; port 0 takes a free
// one) and serves as Serve does. ready, when not nil, is called with the
// address listened on before the first request is taken.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	return s.Serve(ctx, ln, nil)
}
