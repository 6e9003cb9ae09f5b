package mobile

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"

	"github.com/aotlm/aotlm/serve"
)

// Server is the OpenAI-compatible server (package serve, with its web
// chat) running inside the app on one model: other parts of the app, or a
// web view, talk to it at URL with any OpenAI client.
type Server struct {
	srv    *serve.Server
	url    string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartServer serves m on host:port (host "" is 127.0.0.1, the device
// only; port 0 takes a free one) with parallel requests generating at
// once (0: 1). apiKey, when not "", is the Bearer token every API request
// must carry. It returns once the server listens.
func (m *Model) StartServer(host string, port, parallel int, apiKey string) (*Server, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	if port < 0 || port > 65535 {
		return nil, errors.New("port " + strconv.Itoa(port) + ": want 0 (any free port) to 65535")
	}
	srv, err := serve.New(m.m, serve.Options{Parallel: parallel, APIKey: apiKey})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		srv.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{srv: srv, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(ctx, ln, nil) }()
	return s, nil
}

// URL is the server's address, such as "http://127.0.0.1:41234"; the
// OpenAI API is under URL + "/v1".
func (s *Server) URL() string { return s.url }

// Stop lets the requests in flight finish (up to ten seconds), stops the
// server and releases its sessions; the model stays open. Calls after the
// first return the first one's result.
func (s *Server) Stop() error {
	s.once.Do(func() {
		s.cancel()
		s.err = <-s.done
		s.srv.Close()
	})
	return s.err
}
