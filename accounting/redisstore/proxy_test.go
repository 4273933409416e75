package redisstore

import (
	"io"
	"net"
	"sync"
	"testing"
)

// holdingProxy sits between a Store and Redis and can hold what clients
// send, as a slow network does: a command that times out on the client
// is delivered to Redis later, when the test says so, after whatever the
// test sent around the proxy meanwhile.
type holdingProxy struct {
	tb       testing.TB
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	holding bool
	conns   []*proxyConn
}

type proxyConn struct {
	client, server net.Conn
	held           []byte
	clientGone     bool          // the client closed its side
	serverDone     chan struct{} // closed when Redis closed the connection
}

// startProxy listens on a loopback port and forwards to upstream.
func startProxy(tb testing.TB, upstream string) *holdingProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &holdingProxy{tb: tb, ln: ln, upstream: upstream}
	tb.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.client.Close()
			_ = c.server.Close()
		}
	})
	go p.accept()
	return p
}

// URL is a redis:// URL that goes through the proxy.
func (p *holdingProxy) URL() string { return "redis://" + p.ln.Addr().String() + "/0" }

func (p *holdingProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server, serverDone: make(chan struct{})}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go func() {
			// Drain Redis until it closes the connection, even once the
			// client is gone: its answers then go nowhere.
			_, _ = io.Copy(ignoreErrors{client}, server)
			_ = client.Close()
			close(c.serverDone)
		}()
		go p.forward(c)
	}
}

// forward copies what the client sends to Redis, or keeps it while the
// proxy holds.
func (p *holdingProxy) forward(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		p.mu.Lock()
		if n > 0 {
			if p.holding || len(c.held) > 0 {
				c.held = append(c.held, buf[:n]...)
			} else if _, werr := c.server.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			c.clientGone = true
			if len(c.held) == 0 {
				_ = c.server.(*net.TCPConn).CloseWrite()
			}
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// hold makes the proxy keep what clients send from now on.
func (p *holdingProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = true
}

// deliver sends Redis what the proxy held, connection by connection, and
// stops holding. For each connection whose client has given up, it waits
// until Redis has read all of it and closed it: by then Redis has run
// every command held for it.
func (p *holdingProxy) deliver() {
	p.mu.Lock()
	p.holding = false
	var gone []*proxyConn
	for _, c := range p.conns {
		if len(c.held) == 0 {
			continue
		}
		if _, err := c.server.Write(c.held); err != nil {
			p.tb.Errorf("proxy: delivering to Redis: %v", err)
		}
		c.held = nil
		if c.clientGone {
			_ = c.server.(*net.TCPConn).CloseWrite()
			gone = append(gone, c)
		}
	}
	p.mu.Unlock()
	for _, c := range gone {
		<-c.serverDone
	}
}

// ignoreErrors is a writer that drops what its writer fails to take.
type ignoreErrors struct{ w io.Writer }

func (w ignoreErrors) Write(b []byte) (int, error) {
	_, _ = w.w.Write(b)
	return len(b), nil
}
