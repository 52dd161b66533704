package netproxy

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/printable"
)

type targetKey struct{}

// BlockedHeader marks every refusal so clients and tests can tell the
// proxy's answer from the destination's.
const BlockedHeader = "X-Proxy-Error"

// ServeHTTP serves the HTTP proxy (absolute-form requests and CONNECT) on
// l until l is closed.
func (p *Proxy) ServeHTTP(l net.Listener) error {
	if !p.track(l) {
		return net.ErrClosed
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(p.serveProxy),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				p.trackConn(c) // closes c past maxConns
			case http.StateClosed, http.StateHijacked:
				p.untrackConn(c)
			}
		},
	}
	return srv.Serve(l)
}

// maxHeaderBytes bounds a request's head, on the proxy and in tunnels.
const maxHeaderBytes = 256 << 10

func (p *Proxy) serveProxy(w http.ResponseWriter, r *http.Request) {
	if !p.tokenOK(r.Header.Get("Proxy-Authorization")) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="srt-mcp"`)
		refuse(w, http.StatusProxyAuthRequired, "", "srt-mcp proxy: this execution's proxy token is required")
		return
	}
	r.Header.Del("Proxy-Authorization")
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.URL.Host == "" || !r.URL.IsAbs() {
		refuse(w, http.StatusBadRequest, "", "srt-mcp proxy: send proxy requests (absolute URLs or CONNECT)")
		return
	}
	scheme := strings.ToLower(r.URL.Scheme)
	if scheme != "http" && scheme != "https" {
		refuse(w, http.StatusBadRequest, "", "srt-mcp proxy: only http:// and https:// URLs are proxied")
		return
	}
	host, port, err := splitHostPort(r.URL.Host, defaultPort(scheme))
	if err != nil {
		refuse(w, http.StatusBadRequest, "", "srt-mcp proxy: bad request target "+strconv.Quote(printable.String(r.URL.Host)))
		return
	}
	t, d := p.check(r.Context(), "http", host, port)
	if !d.Allow {
		p.blocked(w, host, port, d.Rule)
		return
	}
	// The sandbox sent this in cleartext, whatever the URL's scheme: to
	// the proxy it is a plain request (srt's rule for header edits and
	// credentials).
	p.forward(w, r, hop{scheme: scheme, host: host, port: port, t: t, plain: true})
}

// connect serves a CONNECT: refused, tunnelled opaquely, or terminated.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitHostPort(r.RequestURI, 443)
	if err != nil || host == "" {
		refuse(w, http.StatusBadRequest, "", "srt-mcp proxy: bad CONNECT target")
		return
	}
	t, d := p.check(r.Context(), "connect", host, port)
	if !d.Allow {
		p.blocked(w, host, port, d.Rule)
		return
	}
	terminate := p.terminates(host, port)
	if !terminate {
		if why := p.mustSee(host, port); why != "" {
			p.report(Decision{Protocol: "connect", Host: reported(host), Port: port, Rule: why})
			refuse(w, http.StatusForbidden, "opaque-tunnel-refused", "srt-mcp: "+why)
			return
		}
	}
	var release func()
	var ok bool
	if terminate {
		release, ok = p.tunnelSlot()
	} else {
		release, ok = p.opaqueSlot()
	}
	if !ok {
		p.report(Decision{Protocol: "connect", Host: reported(host), Port: port, Rule: "too many tunnels open (network.tlsTerminate.maxTunnels)"})
		refuse(w, http.StatusServiceUnavailable, "too-many-tunnels", "srt-mcp: too many tunnels are open (network.tlsTerminate.maxTunnels, 256 by default); close some")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		release()
		refuse(w, http.StatusInternalServerError, "", "srt-mcp proxy: cannot take over the connection")
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		release()
		return
	}
	// Bytes the client sent after the CONNECT head (a ClientHello sent
	// without waiting, say) are already buffered.
	var early []byte
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ = brw.Reader.Peek(n)
		early = append([]byte(nil), early...)
	}
	conn := net.Conn(c)
	if len(early) > 0 {
		conn = &prefixConn{Conn: c, prefix: early}
	}
	if terminate {
		p.terminate(conn, hop{scheme: "https", host: host, port: port, t: t}, release)
		return
	}
	defer release()
	p.tunnel(conn, t, true)
}

// mustSee says why a tunnel to host:port may not be opaque ("" when it
// may be): a request rule names the host, a masked credential may be sent
// to it (what it hands back must be checked for the value), or the
// operator refuses every tunnel the proxy cannot see into.
func (p *Proxy) mustSee(host string, port int) string {
	if p.cfg.Swapper.BodyInjection() {
		return "a masked credential may be put into request bodies (injectBody), so a value an API stores could come back through any tunnel the proxy cannot see into; every such tunnel is refused"
	}
	if p.cfg.Swapper.InjectableAt(host, port) {
		return "a masked credential may be sent to " + reported(host) + ", so the proxy must see its traffic, and it cannot see into this tunnel (network.tlsTerminate off, the host in excludeDomains, SOCKS, or no TLS in the tunnel)"
	}
	if op, call := p.cfg.Network.RulesFor(host, port); len(op)+len(call) > 0 {
		if p.cfg.CA == nil {
			return "request rules apply to " + reported(host) + ", and the proxy cannot see into its HTTPS without network.tlsTerminate"
		}
		return "request rules apply to " + reported(host) + ", which network.tlsTerminate.excludeDomains keeps opaque"
	}
	if p.cfg.Network.RefuseOpaqueTunnels {
		return "network.refuseOpaqueTunnels: the proxy would not see into this tunnel"
	}
	return ""
}

// tunnel copies an allowed CONNECT's bytes both ways, answering it first
// (200, or 502 when the upstream cannot be reached) unless it was
// answered already (a terminated tunnel that turned out to carry no
// TLS). On Linux the copies between two TCP sockets use splice(2).
func (p *Proxy) tunnel(client net.Conn, t target, answer bool) {
	if !p.trackConn(client) {
		return
	}
	defer p.untrackConn(client)
	defer client.Close()
	up, err := p.dial(context.Background(), t)
	if err != nil {
		if !answer {
			return
		}
		_, _ = io.WriteString(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nsrt-mcp proxy: cannot connect: "+err.Error()+"\n")
		return
	}
	if !p.trackConn(up) {
		return
	}
	defer p.untrackConn(up)
	defer up.Close()
	if answer {
		if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
			return
		}
	}
	pipe(client, up)
}

// pipe copies both ways until both directions are done.
func pipe(client, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, client)
		closeWrite(up)
	}()
	_, _ = io.Copy(client, up)
	closeWrite(client)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// prefixConn replays bytes read ahead before the connection's own.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func defaultPort(scheme string) int {
	if strings.EqualFold(scheme, "https") {
		return 443
	}
	return 80
}

// refuse writes the proxy's own answer: code, the X-Proxy-Error kind, a
// one-line body, and the connection closed after it.
func refuse(w http.ResponseWriter, code int, kind, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Connection", "close")
	if kind != "" {
		h.Set(BlockedHeader, kind)
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// blocked is the refusal every HTTP client shows: 403 with the host, the
// port and the rule that decided; an operator's deny reason is the body's
// first words and, cleaned, the status phrase (what git and curl print).
func (p *Proxy) blocked(w http.ResponseWriter, host string, port int, rule string) {
	reason := p.cfg.Decider.ReasonFor(rule)
	msg := fmt.Sprintf("srt-mcp: network access to %s:%d is blocked (%s)", printable.String(reported(host)), port, rule)
	if reason != "" {
		msg = reason + " — " + msg
	}
	w.Header().Set("X-Srt-Mcp-Rule", statusPhrase(rule))
	if reason != "" && respondWithPhrase(w, http.StatusForbidden, statusPhrase(reason), "blocked-by-allowlist", msg) {
		return
	}
	refuse(w, http.StatusForbidden, "blocked-by-allowlist", msg)
}

// statusPhrase cleans a reason for a status line: ASCII printable only
// (others become '?'), one line, at most 400 bytes.
func statusPhrase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 400 {
			break
		}
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f:
		case r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return strings.TrimSpace(b.String())
}

// respondWithPhrase writes a refusal whose status line carries phrase
// (Go's server always writes the standard one, and a deny reason belongs
// there: it is what git and many HTTP clients print). It takes the
// connection over and closes it after the response.
func respondWithPhrase(w http.ResponseWriter, code int, phrase, kind, msg string) bool {
	hj, ok := w.(http.Hijacker)
	if !ok || phrase == "" {
		return false
	}
	h := w.Header().Clone()
	c, brw, err := hj.Hijack()
	if err != nil {
		return false
	}
	defer c.Close()
	body := msg + "\n"
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Connection", "close")
	h.Set(BlockedHeader, kind)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\n", code, phrase)
	_ = h.Write(brw)
	_, _ = brw.WriteString("\r\n" + body)
	_ = brw.Flush()
	return true
}
