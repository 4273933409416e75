package redisstore

import (
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
	replied *sync.Cond // signalled whenever Redis sends a connection anything
	holding bool
	conns   []*proxyConn
}

type proxyConn struct {
	client, server net.Conn
	held           []byte
	clientGone     bool  // the client closed its side
	answers        int64 // bytes Redis has sent on this connection
	closed         bool  // Redis closed the connection
}

// startProxy listens on a loopback port and forwards to upstream.
func startProxy(tb testing.TB, upstream string) *holdingProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &holdingProxy{tb: tb, ln: ln, upstream: upstream}
	p.replied = sync.NewCond(&p.mu)
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
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go p.backward(c)
		go p.forward(c)
	}
}

// backward copies Redis's answers to the client, and goes on reading them
// once the client is gone (they then go nowhere), counting them.
func (p *holdingProxy) backward(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			_, _ = c.client.Write(buf[:n])
			p.mu.Lock()
			c.answers += int64(n)
			p.replied.Broadcast()
			p.mu.Unlock()
		}
		if err != nil {
			_ = c.client.Close()
			p.mu.Lock()
			c.closed = true
			p.replied.Broadcast()
			p.mu.Unlock()
			return
		}
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

// deliver sends Redis what the proxy held, connection by connection, stops
// holding, and waits until Redis has answered on each of those
// connections: Redis answers a command once it has run it. (Each held
// connection carries one command: its client waited for the answer.)
func (p *holdingProxy) deliver() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = false
	for _, c := range p.conns {
		if len(c.held) == 0 {
			continue
		}
		before := c.answers
		if _, err := c.server.Write(c.held); err != nil {
			p.tb.Errorf("proxy: delivering to Redis: %v", err)
			continue
		}
		c.held = nil
		if c.clientGone {
			_ = c.server.(*net.TCPConn).CloseWrite()
		}
		for c.answers == before && !c.closed {
			p.replied.Wait()
		}
		if c.answers == before {
			p.tb.Errorf("proxy: Redis closed a connection without answering what was delivered")
		}
	}
}
