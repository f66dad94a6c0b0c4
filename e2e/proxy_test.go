//go:build e2e

package e2e

import (
	"errors"
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections to the API server and can cut them all at
// once, as a load balancer that restarts or a network blip does, while the
// API server itself stays up: a client's watches end (EOF) and are resumed
// from the resourceVersion they had.
type proxy struct {
	listener net.Listener
	target   string
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// startProxy listens on a free local port and forwards to target
// (host:port).
func startProxy(target string) (*proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{listener: l, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.listener.Addr().String() }

func (p *proxy) serve() {
	for {
		in, err := p.listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.track(in, out)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *proxy) track(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
}

// pipe copies from one side to the other and closes both when either ends.
func (p *proxy) pipe(from, to net.Conn) {
	_, _ = io.Copy(to, from)
	_ = from.Close()
	_ = to.Close()
	p.mu.Lock()
	delete(p.conns, from)
	delete(p.conns, to)
	p.mu.Unlock()
}

// cut closes every connection open now; new ones are served as before. It
// returns how many client connections it cut.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
	return n
}

func (p *proxy) close() {
	_ = p.listener.Close()
	p.cut()
}
