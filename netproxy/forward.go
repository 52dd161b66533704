package netproxy

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
)

// Request is one proxied request as the audit log keeps it: never a
// query, a header value or a body, and never a secret.
type Request struct {
	Time        time.Time `json:"time"`
	Scheme      string    `json:"scheme"` // "http" (cleartext) or "https" (terminated)
	Method      string    `json:"method"`
	Host        string    `json:"host"`
	Port        int       `json:"port"`
	Path        string    `json:"path"` // as the client spelled it, without the query
	Decision    string    `json:"decision"`
	Rule        string    `json:"rule,omitempty"`
	Credentials []string  `json:"credentials,omitempty"` // names of the secrets put in
	Status      int       `json:"status,omitempty"`
	BytesOut    int64     `json:"bytes_out,omitempty"` // request body sent upstream
	BytesIn     int64     `json:"bytes_in,omitempty"`  // response body returned
}

// maxBufferedBody is the most of a request body the proxy holds to give
// it an exact Content-Length after a swap that changed its length; a
// larger one goes chunked.
const maxBufferedBody = 1 << 20

// reqState is one forwarded request's decisions, for the reverse proxy's
// hooks.
type reqState struct {
	h        hop
	target   string // the path to send, with the query
	setHdr   map[string]string
	inject   bool
	inj      credentials.Injection
	mu       sync.Mutex // bodyUsed: the body is read on the transport's goroutine
	bodyUsed map[string]bool
	rec      *Request
}

type stateKey struct{}

// forward judges one request (method, target, rules), swaps credentials
// in and forwards it over a verified connection, then swaps them out of
// the response and records it.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, h hop) {
	scheme := "https"
	if h.plain {
		scheme = "http"
	}
	path, query := spelledTarget(r)
	rec := &Request{Time: time.Now().UTC(), Scheme: scheme, Method: printable.String(truncate(r.Method, 32)), Host: reported(h.host), Port: h.port, Path: printable.String(truncate(path, 512))}
	deny := func(code int, kind, rule, msg string) {
		rec.Decision, rec.Rule, rec.Status = "deny", rule, code
		p.reportRequest(*rec)
		refuse(w, code, kind, "srt-mcp proxy: "+msg)
	}
	if m := strings.ToUpper(r.Method); m == "TRACE" || m == "TRACK" {
		deny(http.StatusMethodNotAllowed, "trace-refused", "TRACE and TRACK are refused", printable.String(r.Method)+" is refused: its response would echo the request's headers, credentials included")
		return
	}
	if strings.EqualFold(r.Method, http.MethodConnect) {
		deny(http.StatusBadRequest, "bad-request-target", "CONNECT inside a tunnel", "CONNECT is not proxied inside a tunnel or as a cleartext request")
		return
	}
	send := path
	if path != "*" || r.Method != http.MethodOptions {
		if !strings.HasPrefix(path, "/") {
			deny(http.StatusBadRequest, "bad-request-target", "request target not in origin form", "the request target must be a path starting with /")
			return
		}
		norm := policy.NormalizeTarget(path)
		if policy.EncodedTraversal(path) {
			deny(http.StatusBadRequest, "ambiguous-request-target", "an encoded dot segment",
				fmt.Sprintf("the request target %q holds a dot segment behind an encoded separator or a ;parameter (..%%2f, ..;), which upstreams resolve differently; send the path it means", printable.String(truncate(path, 200))))
			return
		}
		if norm != path {
			switch p.cfg.Network.AmbiguousRequestTarget {
			case policy.TargetNormalize:
				send = norm
			case policy.TargetAsSpelled:
				if strings.HasPrefix(path, "//") {
					send = norm // an origin-form target cannot start with // on the wire
				}
			default:
				deny(http.StatusBadRequest, "ambiguous-request-target", "network.ambiguousRequestTarget: refuse",
					fmt.Sprintf("the request target %q reads as %q once normalised (dot segments, %%2e, backslashes or leading slashes); send the normalised path", printable.String(truncate(path, 200)), printable.String(truncate(norm, 200))))
				return
			}
		}
		op, call := p.cfg.Network.RulesFor(h.host, h.port)
		setHdr := map[string]string{}
		for _, set := range []struct {
			name  string
			rules []policy.RequestRule
		}{{"network.requestRules", op}, {"the call's request_rules", call}} {
			if len(set.rules) == 0 {
				continue
			}
			matched := false
			for _, rule := range set.rules {
				if rule.Match(r.Method, norm) {
					matched = true
					for k, v := range rule.SetHeaders {
						setHdr[k] = v
					}
					break
				}
			}
			if !matched {
				deny(http.StatusForbidden, "blocked-by-request-rule", set.name+" for "+reported(h.host),
					fmt.Sprintf("%s %s on %s is not allowed by %s (%s)", printable.String(r.Method), printable.String(truncate(norm, 200)), reported(h.host), set.name, describeRules(set.rules)))
				return
			}
		}
		if len(setHdr) > 0 && h.plain && !p.cfg.Network.AllowPlaintextHeaderSet {
			deny(http.StatusForbidden, "plaintext-header-set", "network.allowPlaintextHeaderSet is off", "a request rule sets headers on "+reported(h.host)+", and this request is cleartext; use https://")
			return
		}
		st := &reqState{h: h, setHdr: setHdr, rec: rec}
		st.target = send
		if query != "" {
			st.target += "?" + query
		}
		p.proxyRequest(w, r, st)
		return
	}
	st := &reqState{h: h, target: "*", rec: rec}
	p.proxyRequest(w, r, st)
}

func (p *Proxy) proxyRequest(w http.ResponseWriter, r *http.Request, st *reqState) {
	h := st.h
	st.inject = !p.cfg.Swapper.Empty() && !h.mismatch && (!h.plain || p.cfg.AllowPlaintextInject)
	ctx := context.WithValue(r.Context(), targetKey{}, h.t)
	ctx = context.WithValue(ctx, stateKey{}, st)
	rw := &recordingWriter{ResponseWriter: w}
	p.reverse().ServeHTTP(rw, r.WithContext(ctx))
	st.rec.Decision = "allow"
	if st.rec.Rule == "" {
		st.rec.Rule = "allowed"
	}
	st.rec.Status = rw.status
	st.rec.BytesIn = rw.bytes
	st.mu.Lock()
	for name := range st.bodyUsed {
		st.rec.Credentials = appendOnce(st.rec.Credentials, name)
	}
	st.mu.Unlock()
	p.reportRequest(*st.rec)
}

// reverse is the proxy's one reverse proxy; each request's decisions
// travel in its context.
func (p *Proxy) reverse() *httputil.ReverseProxy {
	p.reverseOnce.Do(func() {
		p.rp = &httputil.ReverseProxy{
			Transport:      checked1xx{p: p, next: p.upstream()},
			Rewrite:        p.rewrite,
			ModifyResponse: p.modifyResponse,
			ErrorHandler:   p.upstreamError,
			ErrorLog:       discardLog,
			FlushInterval:  -1,
			BufferPool:     copyBuffers{},
		}
	})
	return p.rp
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	st := pr.In.Context().Value(stateKey{}).(*reqState)
	h := st.h
	out := pr.Out
	authority := h.host
	if strings.Contains(authority, ":") {
		authority = "[" + authority + "]"
	}
	if h.port != defaultPort(h.scheme) {
		authority += ":" + strconv.Itoa(h.port)
	}
	u := &url.URL{Scheme: h.scheme, Host: authority}
	path, query, _ := strings.Cut(st.target, "?")
	u.Opaque, u.RawQuery = path, query
	out.URL = u
	out.Host = pr.In.Host
	if h.plain {
		out.Host = authority
	}
	for k, v := range st.setHdr {
		out.Header.Set(k, v)
	}
	if !p.cfg.Swapper.Empty() {
		// Every response is checked for the secrets' values (an upstream
		// that stored one may hand it back later, to any request): ask
		// only for encodings the proxy can read, identity or gzip; never
		// for part of a resource (two ranges could each hold half a
		// value); never for compressed WebSocket frames.
		if strings.Contains(strings.ToLower(out.Header.Get("Accept-Encoding")), "gzip") {
			out.Header.Set("Accept-Encoding", "gzip")
		} else {
			out.Header.Del("Accept-Encoding")
		}
		out.Header.Del("Range")
		out.Header.Del("If-Range")
		out.Header.Del("Sec-WebSocket-Extensions")
	}
	if !st.inject {
		return
	}
	st.inj = p.cfg.Swapper.InjectRequest(out, h.host, h.port)
	st.rec.Credentials = append(st.rec.Credentials, st.inj.Names...)
	if len(st.inj.Body) > 0 && out.Body != nil && out.Body != http.NoBody && out.ContentLength != 0 {
		st.bodyUsed = map[string]bool{}
		body := credentials.NewReader(out.Body, st.inj.Body, func(i int) {
			st.mu.Lock()
			st.bodyUsed[st.inj.BodyNames[i]] = true
			st.mu.Unlock()
		})
		switch {
		case st.inj.SameLength:
			out.Body = io.NopCloser(body)
		case out.ContentLength > 0 && out.ContentLength <= maxBufferedBody:
			b, err := io.ReadAll(io.LimitReader(body, maxBufferedBody*2))
			if err != nil {
				out.Body = io.NopCloser(&errReader{err})
				break
			}
			out.Body = io.NopCloser(bytes.NewReader(b))
			out.ContentLength = int64(len(b))
		default:
			out.Body = io.NopCloser(body)
			out.ContentLength = -1
		}
		out.Header.Del("Content-Length")
	}
}

// stripHeaders removes the operator's stripResponseHeaders from h.
func (p *Proxy) stripHeaders(h http.Header) {
	for _, name := range p.cfg.Network.StripResponseHeaders {
		fold := foldHeader(name)
		for k := range h {
			if foldHeader(k) == fold {
				h.Del(k)
			}
		}
	}
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	st := resp.Request.Context().Value(stateKey{}).(*reqState)
	p.stripHeaders(resp.Header)
	if p.cfg.Swapper.Empty() {
		p.readAheadLarge(resp)
		return nil
	}
	pairs := st.inj.Redact
	if pairs == nil {
		pairs = p.cfg.Swapper.RedactPairs()
	}
	credentials.RedactHeader(resp.Header, pairs)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection (WebSocket) carries frames: a value split
		// across two of them, or compressed in one, is not seen. So no
		// upgrade to a host a credential may be sent to; elsewhere no
		// compression (the offer was taken out of the request) and only
		// same-length swaps, which keep frame lengths.
		if p.cfg.Swapper.InjectableAt(st.h.host, st.h.port) {
			return fmt.Errorf("a masked credential may be sent to %s, and an upgraded connection to it (%s) cannot be checked for the value", reported(st.h.host), printable.String(resp.Header.Get("Upgrade")))
		}
		if len(resp.Header.Values("Sec-WebSocket-Extensions")) > 0 {
			return fmt.Errorf("the upstream answered with WebSocket extensions the proxy did not offer")
		}
		if credentials.GrowsOrShrinks(pairs) {
			return fmt.Errorf("an upgraded connection (%s) cannot be checked for a credential whose stand-in differs in length from its value", printable.String(resp.Header.Get("Upgrade")))
		}
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			return fmt.Errorf("the upgraded connection is not writable")
		}
		resp.Body = &upgradedConn{Reader: credentials.NewReader(rwc, pairs, nil), rwc: rwc}
		return nil
	}
	if resp.StatusCode == http.StatusPartialContent {
		return fmt.Errorf("the upstream answered with part of a resource (206) the proxy did not ask for; parts are not checked for credentials' values")
	}
	if resp.Body == nil || resp.Body == http.NoBody || resp.Request.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	bodyPairs := pairs
	if !textual(resp.Header.Get("Content-Type")) {
		// A binary body (a package, an archive, an image) carries a value
		// as it was stored, not re-spelled: scanning for one spelling
		// keeps large downloads fast.
		bodyPairs = credentials.Plain(pairs)
	}
	body := resp.Body
	// Trailers arrive after the body, announced or not (the client adds
	// unannounced ones to resp.Trailer at the end): checked when it ends.
	body = &trailerCheck{ReadCloser: body, done: func() {
		if resp.Trailer != nil {
			p.stripHeaders(resp.Trailer)
			credentials.RedactHeader(resp.Trailer, pairs)
		}
	}}
	var encs []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for _, e := range strings.Split(v, ",") {
			if e = strings.ToLower(strings.TrimSpace(e)); e != "" && e != "identity" {
				encs = append(encs, e)
			}
		}
	}
	if len(encs) > 1 {
		body.Close()
		return fmt.Errorf("cannot check the response for credentials' values: it is encoded more than once (%s)", printable.String(strings.Join(encs, ", ")))
	}
	if len(encs) == 1 {
		enc := encs[0]
		var dec io.ReadCloser
		var err error
		switch enc {
		case "gzip", "x-gzip":
			dec, err = gzip.NewReader(body)
		case "deflate":
			dec = flate.NewReader(body)
		default:
			err = fmt.Errorf("the response is %s-encoded", enc)
		}
		if err != nil {
			body.Close()
			return fmt.Errorf("cannot check the response for credentials' values: %v", err)
		}
		raw := body
		body = &readCloser{Reader: dec, close: func() error { dec.Close(); return raw.Close() }}
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	orig := body
	resp.Body = &readCloser{Reader: credentials.NewReader(body, bodyPairs, nil), close: orig.Close}
	if credentials.GrowsOrShrinks(bodyPairs) {
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	p.readAheadLarge(resp)
	return nil
}

// textual reports whether a Content-Type is text an API writes (or none
// is given): JSON, XML, HTML, forms, YAML, CSV, JavaScript, multipart.
func textual(ct string) bool {
	ct = strings.ToLower(strings.TrimSpace(ct))
	if ct == "" || strings.HasPrefix(ct, "text/") || strings.HasPrefix(ct, "multipart/") {
		return true
	}
	for _, k := range []string{"json", "xml", "javascript", "ecmascript", "x-www-form-urlencoded", "yaml", "csv", "graphql", "ndjson"} {
		if strings.Contains(ct, k) {
			return true
		}
	}
	return false
}

// checked1xx is the upstream transport with informational responses'
// headers (103 Early Hints, say: the reverse proxy passes them on before
// any other hook) stripped and redacted like a final response's.
type checked1xx struct {
	p    *Proxy
	next http.RoundTripper
}

func (c checked1xx) RoundTrip(r *http.Request) (*http.Response, error) {
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		c.p.stripHeaders(http.Header(h))
		credentials.RedactHeader(http.Header(h), c.p.cfg.Swapper.RedactPairs())
		return nil
	}}
	return c.next.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
}

// readAheadLarge reads a large (or unsized) response body on a goroutine
// of its own, a few buffers ahead: decrypting the upstream's TLS (and
// scanning for secrets) then runs beside encrypting for the client,
// on another core, instead of taking turns with it.
func (p *Proxy) readAheadLarge(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody || resp.Request.Method == http.MethodHead ||
		(resp.ContentLength >= 0 && resp.ContentLength < readAheadMin) {
		return
	}
	// A few at a time per proxy: each holds its buffers while its client
	// is slow, and the proxy's memory is outside the sandbox's limit.
	select {
	case p.readAheads <- struct{}{}:
	default:
		return
	}
	ra := newReadAhead(resp.Body, resp.ContentLength)
	ra.release = func() { <-p.readAheads }
	resp.Body = ra
}

// maxReadAheads bounds the bodies one proxy reads ahead at once.
const maxReadAheads = 8

// copyBuffers are the reverse proxy's copy buffers: 128 KiB, so a large
// body is written (and flushed) in fewer, fuller TLS writes.
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

func (copyBuffers) Get() []byte  { return *(copyBufferPool.Get().(*[]byte)) }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put(&b) }

// readAheadMin is the smallest body worth a goroutine of its own.
const readAheadMin = 256 << 10

// readAhead is a body read ahead into a few reused buffers.
type readAhead struct {
	src  io.ReadCloser
	left int64       // bytes of the body still to come; -1: unknown
	full chan []byte // filled buffers, in order; closed at the source's end
	free chan []byte
	done chan struct{}
	cur  []byte // what Read hands out now
	buf  []byte // cur's buffer, back to free when cur is used up
	err  error  // the source's error, after full is closed
	once sync.Once
	// release gives back the proxy's read-ahead slot, once.
	release func()
}

const (
	readAheadBufs = 4
	readAheadSize = 64 << 10
)

// newReadAhead starts reading src ahead. With the body's length known
// (size >= 0) each buffer is filled whole, or to the body's end (a TLS
// connection hands out one 16 KiB record per read), instead of passed on
// after the first read.
func newReadAhead(src io.ReadCloser, size int64) *readAhead {
	r := &readAhead{src: src, left: size, full: make(chan []byte, readAheadBufs), free: make(chan []byte, readAheadBufs+1), done: make(chan struct{})}
	for i := 0; i < readAheadBufs+1; i++ {
		r.free <- make([]byte, readAheadSize)
	}
	go r.fill()
	return r
}

func (r *readAhead) fill() {
	defer close(r.full)
	for {
		var b []byte
		select {
		case b = <-r.free:
		case <-r.done:
			return
		}
		want := 1
		if r.left > 0 {
			want = int(min(int64(len(b)), r.left))
		}
		n, err := io.ReadAtLeast(r.src, b, want)
		if r.left > 0 {
			r.left -= int64(n)
		}
		if n > 0 {
			select {
			case r.full <- b[:n]:
			case <-r.done:
				return
			}
		}
		if err != nil {
			r.err = err // read after full is closed
			return
		}
	}
}

func (r *readAhead) Read(p []byte) (int, error) {
	if len(r.cur) == 0 {
		if r.buf != nil {
			r.free <- r.buf[:cap(r.buf)]
			r.buf = nil
		}
		b, ok := <-r.full
		if !ok {
			if r.err == nil {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, r.err
		}
		r.cur, r.buf = b, b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *readAhead) Close() error {
	r.once.Do(func() {
		close(r.done)
		if r.release != nil {
			r.release()
		}
	})
	return r.src.Close()
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	msg := err.Error()
	if p.cfg.Swapper != nil && st != nil {
		msg = string(credentials.RedactAll(p.cfg.Swapper.RedactPairs(), []byte(msg)))
	}
	code := http.StatusBadGateway
	if st != nil {
		st.rec.Rule = "upstream error"
	}
	refuse(w, code, "upstream-failed", "srt-mcp proxy: "+printable.String(truncate(msg, 400)))
}

// upstream is the transport of every forwarded request: it dials only the
// address the request's check passed and verifies TLS against the host's
// roots and the operator's extra CAs.
func (p *Proxy) upstream() *http.Transport {
	return &http.Transport{
		Proxy: nil, // never chain to a proxy from the environment
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			t, ok := ctx.Value(targetKey{}).(target)
			if !ok {
				return nil, fmt.Errorf("netproxy: no checked target for %s", addr)
			}
			return p.dial(ctx, t)
		},
		TLSClientConfig:       upstreamTLS(p.cfg.Roots),
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// spelledTarget returns a request's path as the client wrote it and its
// query (a fragment cut off).
func spelledTarget(r *http.Request) (path, query string) {
	t := r.RequestURI
	if i := strings.IndexByte(t, '#'); i >= 0 {
		t = t[:i]
	}
	if r.URL.IsAbs() || !strings.HasPrefix(t, "/") && t != "*" {
		// absolute form: scheme://authority/path?query
		if i := strings.Index(t, "://"); i >= 0 {
			rest := t[i+3:]
			if j := strings.IndexAny(rest, "/?"); j >= 0 {
				t = rest[j:]
			} else {
				t = "/"
			}
			if strings.HasPrefix(t, "?") {
				t = "/" + t
			}
		}
	}
	path, query, _ = strings.Cut(t, "?")
	return path, query
}

// pathOf is a request's path for a record.
func pathOf(r *http.Request) string {
	p, _ := spelledTarget(r)
	return printable.String(truncate(p, 512))
}

func describeRules(rs []policy.RequestRule) string {
	var parts []string
	for _, r := range rs {
		m := "any method"
		if len(r.Methods) > 0 {
			m = strings.Join(r.Methods, "/")
		}
		ps := "any path"
		if len(r.Paths) > 0 {
			ps = "under " + strings.Join(r.Paths, ", ")
		}
		parts = append(parts, m+" "+ps)
	}
	return "allowed: " + strings.Join(parts, "; ")
}

// foldHeader is srt's header-name comparison: case-insensitive, with '-',
// '_' and '.' alike.
func foldHeader(s string) string {
	return strings.NewReplacer("_", "-", ".", "-").Replace(strings.ToLower(s))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func appendOnce(ss []string, s string) []string {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	return append(ss, s)
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r *readCloser) Close() error { return r.close() }

// upgradedConn is an upgraded connection whose reads are swapped.
type upgradedConn struct {
	io.Reader
	rwc io.ReadWriteCloser
}

func (c *upgradedConn) Write(b []byte) (int, error) { return c.rwc.Write(b) }
func (c *upgradedConn) Close() error                { return c.rwc.Close() }

// trailerCheck calls done when its body ends, before the reverse proxy
// sends the trailers.
type trailerCheck struct {
	io.ReadCloser
	done func()
	once sync.Once
}

func (t *trailerCheck) Read(b []byte) (int, error) {
	n, err := t.ReadCloser.Read(b)
	if err != nil {
		t.once.Do(t.done)
	}
	return n, err
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// recordingWriter notes the status and body bytes of a response.
type recordingWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 || code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets the reverse proxy reach the connection (upgrades).
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// upstreamTLS verifies every upstream against roots (nil: the host's).
func upstreamTLS(roots *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

var discardLog = log.New(io.Discard, "", 0)
