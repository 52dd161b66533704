// Package netproxy is the egress filter of one execution: an HTTP proxy
// (plain requests and CONNECT tunnels, on goproxy) and a SOCKS5 proxy (the
// proxy resolves names: socks5h), both deciding with one policy.Decider,
// both dialing only an address that passed the resolved-address guard, and
// both reporting every allow and deny with the rule that decided.
//
// The proxy knows nothing about processes: it serves whatever listeners it
// is given. The runner gives it listeners that live inside one sandbox's
// network namespace, so only that sandbox can reach it; a per-execution
// token is required as well.
package netproxy

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/tlsca"
)

// Decision is one allow or deny, reported to Config.OnDecision.
type Decision struct {
	Protocol string // "http", "connect" or "socks5"
	Host     string // as requested
	Port     int
	Allow    bool
	Rule     string     // the pattern or reason that decided
	Addr     netip.Addr // the address dialed (allowed names only)
}

// Resolver looks up a host's addresses. net.DefaultResolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Proxy.
type Config struct {
	Decider *policy.Decider
	// Token is the per-execution secret: the password of HTTP proxy basic
	// auth and of SOCKS5 user/password auth. Empty disables the check.
	Token string
	// Resolver resolves names; nil means the system resolver.
	Resolver Resolver
	// AllowedRanges are address ranges a name may resolve to even though
	// the guard would refuse them (loopback, private, link-local, metadata).
	AllowedRanges []netip.Prefix
	// OnDecision receives every decision. It must not block for long.
	OnDecision func(Decision)
	// DialTimeout bounds each upstream connect (default 30s).
	DialTimeout time.Duration

	// Network is the policy whose request-level keys (rules, host
	// matching, ambiguous targets, stripped headers, opaque tunnels)
	// the proxy applies; Decider decides its names.
	Network policy.Network
	// CA, when set, terminates HTTPS tunnels (network.tlsTerminate) to
	// names not in Network.TLSTerminate.ExcludeDomains.
	CA *tlsca.CA
	// Roots verify upstream TLS (nil: the host's roots).
	Roots *x509.CertPool
	// Swapper puts the run's masked credentials into requests and takes
	// them out of responses; nil: none.
	Swapper *credentials.Swapper
	// AllowPlaintextInject lets credentials go into cleartext requests.
	AllowPlaintextInject bool
	// OnRequest receives every request the proxy saw into (cleartext or
	// terminated), allowed or refused. It must not block for long.
	OnRequest func(Request)
}

// Rules used when the decider allowed a name but its address did not pass.
const (
	RuleResolveFailed = "could not resolve the host name"
	RuleGuard         = "resolves to a loopback, private, link-local or metadata address (DNS-rebinding guard); allow that range explicitly to reach it"
)

// Proxy is one execution's egress filter.
type Proxy struct {
	cfg Config

	mu        sync.Mutex
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	closed    bool

	bytesOut, bytesIn atomic.Int64 // upstream traffic, all connections

	exclude    []policy.Pattern // tlsTerminate.excludeDomains
	slots      chan struct{}    // one per terminated tunnel open (maxTunnels)
	opaque     chan struct{}    // one per opaque tunnel open (CONNECT or SOCKS), as many
	readAheads chan struct{}    // bodies read ahead at once (maxReadAheads)
	handshake  time.Duration

	innerOnce   sync.Once
	innerSrv    *innerServer
	reverseOnce sync.Once
	rp          *httputil.ReverseProxy
	closers     []func() error
}

// New checks cfg and returns a Proxy that serves nothing yet.
func New(cfg Config) (*Proxy, error) {
	if cfg.Decider == nil {
		return nil, errors.New("netproxy: no decider")
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 30 * time.Second
	}
	p := &Proxy{cfg: cfg, conns: map[net.Conn]struct{}{}}
	t := cfg.Network.TLSTerminate
	p.slots = make(chan struct{}, t.Tunnels())
	p.opaque = make(chan struct{}, t.Tunnels())
	p.readAheads = make(chan struct{}, maxReadAheads)
	p.handshake = time.Duration(t.HandshakeMs()) * time.Millisecond
	if t != nil {
		for _, d := range t.ExcludeDomains {
			pat, err := policy.ParsePattern(d, false)
			if err != nil {
				return nil, err
			}
			p.exclude = append(p.exclude, pat)
		}
	}
	return p, nil
}

// opaqueSlot takes one of the opaque tunnels' slots.
func (p *Proxy) opaqueSlot() (release func(), ok bool) { return takeSlot(p.opaque) }

// takeSlot takes one of a semaphore's slots without waiting; release
// gives it back, once.
func takeSlot(slots chan struct{}) (release func(), ok bool) {
	select {
	case slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-slots }) }, true
	default:
		return nil, false
	}
}

// report sends a connection-level decision to OnDecision.
func (p *Proxy) report(d Decision) {
	if p.cfg.OnDecision != nil {
		p.cfg.OnDecision(d)
	}
}

// reportRequest sends a request record to OnRequest.
func (p *Proxy) reportRequest(r Request) {
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	if p.cfg.OnRequest != nil {
		p.cfg.OnRequest(r)
	}
}

// Close stops every listener and connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	inner, closers, listeners := p.innerSrv, p.closers, p.listeners
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	// Closing a terminated tunnel untracks it, which takes p.mu: close
	// everything with the lock released.
	if inner != nil {
		inner.Close()
	}
	for _, c := range closers {
		_ = c()
	}
	for _, l := range listeners {
		l.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	return nil
}

func (p *Proxy) track(l net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		l.Close()
		return false
	}
	p.listeners = append(p.listeners, l)
	return true
}

func (p *Proxy) trackConn(c net.Conn) bool {
	p.mu.Lock()
	closed, full := p.closed, len(p.conns) >= maxConns
	if !closed && !full {
		p.conns[c] = struct{}{}
	}
	p.mu.Unlock()
	if closed || full {
		c.Close() // outside p.mu: a tunnel's Close untracks itself
		return false
	}
	return true
}

// maxConns bounds the connections one proxy holds (the sandbox's to it
// and the proxy's upstream): everything a sandbox can make its proxy
// hold is bounded, whatever its own descriptor limits.
const maxConns = 1024

func (p *Proxy) untrackConn(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// maxReportedHost is the most of a host name a decision reports: no valid
// name is longer (253), and a sandbox that asks for a megabyte-long one
// must not make every report of it (events, the audit line) that big.
const maxReportedHost = 253

// reported is host as a decision reports it.
func reported(host string) string {
	if len(host) <= maxReportedHost {
		return host
	}
	return fmt.Sprintf("%s...(%d bytes)", host[:64], len(host))
}

// target is a destination that passed the decision and the guard.
type target struct {
	host string
	port int
	addr netip.Addr
}

// check decides host:port for protocol, resolves it, applies the guard,
// and reports the decision. It returns the address to dial.
func (p *Proxy) check(ctx context.Context, protocol, host string, port int) (target, Decision) {
	d := Decision{Protocol: protocol, Host: reported(host), Port: port}
	dec := p.cfg.Decider.Decide(host, port)
	d.Allow, d.Rule = dec.Allow, dec.Rule
	t := target{host: host, port: port}
	if d.Allow {
		canon, _ := policy.CanonicalHost(host)
		if ip, ok := policy.ParseIP(canon); ok {
			// An IP literal allowed by an IP entry is the operator's choice,
			// unless a deny entry names it in another form (an IPv4 address
			// inside an IPv6 one).
			if rule, denied := p.cfg.Decider.DeniedAddr(ip, port, EmbeddedV4(ip)...); denied {
				d.Allow, d.Rule = false, rule
			} else {
				t.addr = ip
			}
		} else {
			addr, deny, err := p.resolve(ctx, canon, port)
			switch {
			case err != nil:
				d.Allow, d.Rule = false, RuleResolveFailed+": "+err.Error()
			case !addr.IsValid() && deny != "":
				d.Allow, d.Rule = false, deny+" (the address "+canon+" resolves to)"
			case !addr.IsValid():
				d.Allow, d.Rule = false, RuleGuard
			default:
				t.addr = addr
			}
		}
	}
	d.Addr = t.addr
	p.report(d)
	return t, d
}

// resolve returns the first address of host that no deny entry names and
// that passes the guard; when none does, an invalid address and the deny
// rule that refused the last one ("" when only the guard did).
func (p *Proxy) resolve(ctx context.Context, host string, port int) (netip.Addr, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return netip.Addr{}, "", errors.New("no such host")
		}
		return netip.Addr{}, "", err
	}
	loopbackName := host == "localhost" || strings.HasSuffix(host, ".localhost")
	denied := ""
	for _, a := range addrs {
		a = a.Unmap()
		if rule, ok := p.cfg.Decider.DeniedAddr(a, port, EmbeddedV4(a)...); ok {
			denied = rule // a denied_domains address: never dialled, whatever name led to it
			continue
		}
		if loopbackName && a.IsLoopback() {
			return a, "", nil // "localhost" allowed by name means this host's loopback
		}
		if p.guardAllows(a) {
			return a, "", nil
		}
	}
	return netip.Addr{}, denied, nil
}

func (p *Proxy) guardAllows(a netip.Addr) bool {
	for _, r := range p.cfg.AllowedRanges {
		if r.Contains(a) {
			return true
		}
	}
	return !Restricted(a)
}

// Restricted reports whether a is an address a name may not silently
// resolve to: loopback, unspecified, private, shared (CGNAT), link-local,
// multicast, broadcast, documentation and benchmark ranges, the cloud
// metadata endpoints, and every IPv6 form that embeds any of those (see
// EmbeddedV4).
func Restricted(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is6() {
		if v4s := EmbeddedV4(a); len(v4s) > 0 {
			for _, v4 := range v4s {
				if Restricted(v4) {
					return true
				}
			}
		}
		for _, r := range restrictedV6 {
			if r.Contains(a) {
				return true
			}
		}
	}
	if a.IsLoopback() || a.IsUnspecified() || a.IsPrivate() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return true
	}
	for _, r := range restrictedRanges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

var restrictedRanges = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
		"100.100.100.200/32", "168.63.129.16/32", "169.254.0.0/16",
		"fd00:ec2::/32", "2001:db8::/32", "fc00::/7", "fe80::/10",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// restrictedV6 are IPv6 ranges whose embedded IPv4 address sits where no
// fixed rule finds it: NAT64 local-use prefixes (RFC 8215) may be any
// length, so the whole block is refused.
var restrictedV6 = []netip.Prefix{netip.MustParsePrefix("64:ff9b:1::/48")}

// EmbeddedV4 returns the IPv4 addresses an IPv6 address carries: mapped
// (::ffff:a.b.c.d) and compatible (::a.b.c.d), SIIT (::ffff:0:a.b.c.d,
// RFC 6145), NAT64 well-known (64:ff9b::/96, RFC 6052), 6to4 (2002::/16,
// RFC 3056), Teredo (2001::/32, RFC 4380: the server's address and the
// client's, stored inverted) and ISATAP interface identifiers
// (::0:5efe:a.b.c.d, ::200:5efe:a.b.c.d).
func EmbeddedV4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	var out []netip.Addr
	switch {
	case isZero(b[:10]) && b[10] == 0xff && b[11] == 0xff: // mapped
		out = append(out, v4(12))
	case isZero(b[:12]) && !isZero(b[12:]): // compatible
		out = append(out, v4(12))
	case isZero(b[:8]) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0: // SIIT
		out = append(out, v4(12))
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && isZero(b[4:12]): // NAT64 well-known
		out = append(out, v4(12))
	case b[0] == 0x20 && b[1] == 0x02: // 6to4
		out = append(out, v4(2))
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // Teredo
		out = append(out, v4(4), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	if (b[8]|0x02) == 0x02 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe { // ISATAP
		out = append(out, v4(12))
	}
	return out
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

func (p *Proxy) dial(ctx context.Context, t target) (net.Conn, error) {
	d := net.Dialer{Timeout: p.cfg.DialTimeout, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.addr.String(), strconv.Itoa(t.port)))
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, p: p}, nil
}

// countingConn counts the bytes of an upstream connection.
type countingConn struct {
	net.Conn
	p *Proxy
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.bytesIn.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.p.bytesOut.Add(int64(n))
	return n, err
}

// ReadFrom and WriteTo keep the kernel's zero-copy paths (splice) of the
// TCP connection underneath; CloseWrite keeps half-closes working.
func (c *countingConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		n, err := rf.ReadFrom(r)
		c.p.bytesOut.Add(n)
		return n, err
	}
	return io.Copy(struct{ io.Writer }{c}, r)
}

func (c *countingConn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.Conn.(io.WriterTo); ok {
		n, err := wt.WriteTo(w)
		c.p.bytesIn.Add(n)
		return n, err
	}
	return io.Copy(w, struct{ io.Reader }{c})
}

func (c *countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

func (c *countingConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return nil
}

// Bytes returns how many bytes went to upstream servers and came back.
func (p *Proxy) Bytes() (out, in int64) { return p.bytesOut.Load(), p.bytesIn.Load() }

// tokenOK checks an HTTP Proxy-Authorization header (Basic, any user, the
// token as password).
func (p *Proxy) tokenOK(header string) bool {
	if p.cfg.Token == "" {
		return true
	}
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	_, pass, _ := strings.Cut(string(raw), ":")
	return subtle.ConstantTimeCompare([]byte(pass), []byte(p.cfg.Token)) == 1
}

// splitHostPort parses "host:port" with a default port.
func splitHostPort(hostport string, def int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return strings.Trim(hostport, "[]"), def, nil
		}
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port %q", portStr)
	}
	return host, port, nil
}
