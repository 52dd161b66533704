package guard

import (
	"net"
	"sync"
)

// Listener bounds the connections the server holds open: at most perAddr
// from one address and total in all (0: no bound). A connection past a
// bound is closed as soon as it is accepted, before a byte of it is read:
// one address opening connections and sending nothing cannot take the
// server's descriptors from everyone else. (Idle keep-alive connections
// are closed by the HTTP server's IdleTimeout.)
func Listener(ln net.Listener, perAddr, total int) net.Listener {
	return &boundedListener{Listener: ln, perAddr: perAddr, total: total, byAddr: map[string]int{}}
}

type boundedListener struct {
	net.Listener
	perAddr, total int

	mu     sync.Mutex
	all    int
	byAddr map[string]int
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteHost(c)
		l.mu.Lock()
		over := (l.total > 0 && l.all >= l.total) || (l.perAddr > 0 && l.byAddr[addr] >= l.perAddr)
		if !over {
			l.all++
			l.byAddr[addr]++
		}
		l.mu.Unlock()
		if over {
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l, addr: addr}, nil
	}
}

func remoteHost(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// countedConn gives its place back when it closes.
type countedConn struct {
	net.Conn
	l    *boundedListener
	addr string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.all--
		if c.l.byAddr[c.addr]--; c.l.byAddr[c.addr] <= 0 {
			delete(c.l.byAddr, c.addr)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
