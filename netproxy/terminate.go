package netproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
)

// hop is where one request goes, as the proxy judged it.
type hop struct {
	scheme string // of the upstream request: "http" or "https"
	host   string // as the client named it (CONNECT target or URL host)
	port   int
	t      target // the checked address to dial
	plain  bool   // the client sent the request in cleartext
	sni    string // terminated tunnels: the server name the client asked for
	// mismatch: the request names another (allowed) host than the target;
	// nothing is injected into it.
	mismatch bool
}

type hopKey struct{}

// terminates reports whether a CONNECT to host:port is TLS-terminated.
func (p *Proxy) terminates(host string, port int) bool {
	if p.cfg.CA == nil {
		return false
	}
	h, err := policy.CanonicalHost(host)
	if err != nil {
		return false
	}
	for _, e := range p.exclude {
		if e.Match(h, port) {
			return false
		}
	}
	return true
}

// tunnelSlot takes one of maxTunnels slots; release gives it back.
func (p *Proxy) tunnelSlot() (release func(), ok bool) { return takeSlot(p.slots) }

// terminate answers the CONNECT and, when the client's first bytes are a
// TLS ClientHello, ends its TLS here with a leaf for an allowed name and
// serves its requests (forward); anything else is tunnelled opaquely, or
// refused when the proxy must see into it. The slot is held until the
// tunnel closes.
func (p *Proxy) terminate(c net.Conn, h hop, release func()) {
	if !p.trackConn(c) {
		release()
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		release() // before the close the client sees
		p.untrackConn(c)
		c.Close()
		return
	}
	deadline := time.Now().Add(p.handshake)
	_ = c.SetDeadline(deadline)
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		release() // before the close the client sees
		p.untrackConn(c)
		c.Close()
		return
	}
	pc := &prefixConn{Conn: c, prefix: first}
	if first[0] != 0x16 { // not a TLS handshake record
		if why := p.mustSee(h.host, h.port); why != "" {
			release()
			p.report(Decision{Protocol: "connect", Host: reported(h.host), Port: h.port, Rule: why + " (the tunnel does not carry TLS)"})
			p.untrackConn(c)
			c.Close()
			return
		}
		_ = c.SetDeadline(time.Time{})
		p.untrackConn(c)
		p.tunnel(pc, h.t, false) // holding the tunnel's slot until it closes
		release()
		return
	}
	tc := tls.Server(pc, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		// Full-size records from the first byte: the client is local,
		// there is no slow start to spare it.
		DynamicRecordSizingDisabled: true,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.leafFor(hello.ServerName, h)
		},
	})
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		release() // before the close the client sees
		p.untrackConn(c)
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	h.sni = strings.ToLower(tc.ConnectionState().ServerName)
	p.untrackConn(c)
	p.inner().push(&tunnelConn{Conn: tc, hop: h, release: release, p: p})
}

// leafFor picks the name a terminated tunnel's certificate is minted for:
// the server name the client asked for when it is a plain DNS name the
// policy allows (never a denied one), else the CONNECT target; always the
// target with requireHostMatch.
func (p *Proxy) leafFor(serverName string, h hop) (*tls.Certificate, error) {
	target, err := policy.CanonicalHost(h.host)
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(serverName)
	if name == "" || p.cfg.Network.RequireHostMatch || !plainDNSName(name) {
		name = target
	}
	if name != target {
		if d := p.cfg.Decider.Decide(name, h.port); !d.Allow {
			p.report(Decision{Protocol: "tls", Host: reported(name), Port: h.port, Rule: d.Rule + " (the server name of a tunnel to " + reported(target) + ")"})
			return nil, errors.New("server name not allowed")
		}
	}
	return p.cfg.CA.Leaf(name)
}

// plainDNSName reports whether s is letters, digits and inner hyphens in
// dot-separated labels (srt's test before minting for a server name).
func plainDNSName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// tunnelConn is a terminated tunnel handed to the inner server: it
// carries where its requests go and gives back its slot when closed.
type tunnelConn struct {
	net.Conn
	hop     hop
	release func()
	p       *Proxy
	once    sync.Once
}

func (c *tunnelConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.release()
		c.p.untrackConn(c)
	})
	return err
}

// innerServer serves decrypted tunnels: an http.Server whose listener is
// fed the tunnels the proxy terminated and never listens on anything.
type innerServer struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (s *innerServer) push(c *tunnelConn) {
	if !c.p.trackConn(c) {
		c.Close()
		return
	}
	select {
	case s.conns <- c:
	case <-s.done:
		c.Close()
	}
}

func (s *innerServer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *innerServer) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

func (s *innerServer) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// Idle limits of a terminated tunnel (srt's): a request head must come
// within 10 s, the next one within 6 s of a response (1 s past the
// Keep-Alive: timeout=5 responses carry).
const (
	tunnelHeadTimeout = 10 * time.Second
	tunnelIdleTimeout = 6 * time.Second
)

// inner starts the server for decrypted tunnels on first use.
func (p *Proxy) inner() *innerServer {
	p.innerOnce.Do(func() {
		s := &innerServer{conns: make(chan net.Conn), done: make(chan struct{})}
		p.innerSrv = s
		srv := &http.Server{
			Handler:           http.HandlerFunc(p.serveTunnelRequest),
			ReadHeaderTimeout: tunnelHeadTimeout,
			IdleTimeout:       tunnelIdleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          log.New(io.Discard, "", 0),
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				if tc, ok := c.(*tunnelConn); ok {
					return context.WithValue(ctx, hopKey{}, tc.hop)
				}
				return ctx
			},
		}
		go func() { _ = srv.Serve(s) }()
		p.mu.Lock()
		p.closers = append(p.closers, srv.Close)
		p.mu.Unlock()
	})
	return p.innerSrv
}

// serveTunnelRequest serves one request of a terminated tunnel: the
// names it carries (Host, SNI, an absolute-form authority) are held to
// the CONNECT target, then it is forwarded.
func (p *Proxy) serveTunnelRequest(w http.ResponseWriter, r *http.Request) {
	h, ok := r.Context().Value(hopKey{}).(hop)
	if !ok {
		refuse(w, http.StatusInternalServerError, "", "srt-mcp proxy: lost the tunnel's target")
		return
	}
	target, _ := policy.CanonicalHost(h.host)
	mismatch := ""
	if h.sni != "" && h.sni != target {
		mismatch = "server name " + reported(h.sni)
	}
	names := []string{r.Host}
	if r.URL.IsAbs() {
		names = append(names, r.URL.Host)
	}
	var other []string
	for _, n := range names {
		nh, np, err := splitHostPort(n, 443)
		if err != nil || nh == "" {
			refuse(w, http.StatusBadRequest, "bad-host", "srt-mcp proxy: the request names no valid host")
			return
		}
		ch, err := policy.CanonicalHost(nh)
		if err != nil {
			refuse(w, http.StatusBadRequest, "bad-host", "srt-mcp proxy: the request names a host that is not a valid name: "+printable.String(truncate(n, 200)))
			return
		}
		if ch != target || np != h.port {
			if mismatch == "" {
				mismatch = "host " + reported(n)
			}
			other = append(other, ch)
		}
	}
	if mismatch != "" {
		if p.cfg.Network.RequireHostMatch {
			p.reportRequest(Request{Scheme: "https", Method: printable.String(truncate(r.Method, 32)), Host: reported(h.host), Port: h.port, Path: pathOf(r), Decision: "deny",
				Rule: "network.requireHostMatch: the " + mismatch + " is not the tunnel's target " + reported(h.host), Status: http.StatusMisdirectedRequest})
			refuse(w, http.StatusMisdirectedRequest, "host-mismatch", "srt-mcp proxy: the "+mismatch+" does not match the tunnel's target "+reported(h.host)+" (network.requireHostMatch)")
			return
		}
		// Without requireHostMatch the request may go on, but every name
		// it carries must be one the policy allows, and nothing is
		// injected into it: a credential follows the name it is for.
		for _, n := range append(other, h.sni) {
			if n == "" {
				continue
			}
			if d := p.cfg.Decider.Decide(n, h.port); !d.Allow {
				p.reportRequest(Request{Scheme: "https", Method: printable.String(truncate(r.Method, 32)), Host: reported(h.host), Port: h.port, Path: pathOf(r), Decision: "deny", Rule: d.Rule + " (named in a tunnel to " + reported(h.host) + ")", Status: http.StatusForbidden})
				p.blocked(w, n, h.port, d.Rule)
				return
			}
		}
		h.mismatch = true
	}
	p.forward(w, r, h)
}
