// Package guard is the one set of checks every HTTP route of srt-mcp
// passes before its handler runs: the Host header against DNS rebinding,
// the Origin and Sec-Fetch-Site against cross-site requests, a body cap,
// the route's own authentication, and a rate limit per caller; a refused
// request's connection is closed. The routes differ only in how they
// authenticate (a bearer token, LibreChat's API key or JWT, a signed URL)
// and in their caps. Below the routes, Listener bounds the connections one
// address (and all together) may hold open.
//
// The attackers it stands against: a remote caller (any request, any rate)
// and a web page in the operator's browser, which can send simple
// cross-origin requests (a text/plain POST needs no preflight) and can
// rebind its own name to 127.0.0.1 to read a loopback server's replies.
package guard

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Config is the listener's guard.
type Config struct {
	// AllowedOrigins are browser origins allowed besides loopback ones and
	// the server's own (same-origin); "*" allows any.
	AllowedOrigins []string
	// AllowedHosts are Host header names allowed besides IP literals and
	// localhost; "*" allows any.
	AllowedHosts []string
	// MaxBody caps a request body (default 4 MiB) unless a route sets its
	// own.
	MaxBody int64
	// Rate is requests per second per caller (default 50) with Burst
	// (default 100). A caller is its MCP session on an MCP route
	// (Route.PerSession), else its principal from the address it came from.
	Rate  float64
	Burst int
}

// Route is one route's part of the checks.
type Route struct {
	// Auth authenticates the request and returns its principal ("" and a
	// reply already written when it refuses). Nil: anyone, as "anonymous".
	Auth func(w http.ResponseWriter, r *http.Request) (principal string, ok bool)
	// MaxBody overrides Config.MaxBody (uploads).
	MaxBody int64
	// NoRateLimit exempts the route from the per-caller limit (it limits
	// by itself).
	NoRateLimit bool
	// AnyHost skips the Host check (liveness and readiness probes, which
	// reveal nothing and are sent to a pod's IP).
	AnyHost bool
	// PerSession: the route is MCP's, where a caller is its MCP session
	// (Mcp-Session-Id, with its principal); elsewhere the header means
	// nothing and a caller is its principal and address.
	PerSession bool
	// SessionOwned, when set, tells whether an Mcp-Session-Id is a live
	// session of the principal: only such an id is a rate-limit bucket of
	// its own (an invented id per request would be a fresh bucket each
	// time); any other request counts as its principal's from its address.
	SessionOwned func(id, principal string) bool
	// CrossSite lets a browser's cross-site request through (signed
	// download links, meant to be followed from anywhere; probes).
	// Everywhere else Sec-Fetch-Site: cross-site is refused: an <img> or
	// <script> tag on another site sends no Origin, but browsers mark it.
	CrossSite bool
}

// Guard applies Config to routes.
type Guard struct {
	cfg Config

	limits *Limiters
}

// maxLimiters bounds how many callers' limiters are kept: a client that
// invents a new session id per request cannot make the map grow without
// end (idle ones go first).
const maxLimiters = 10000

// New makes a guard.
func New(cfg Config) *Guard {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 20
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 50
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 100
	}
	return &Guard{cfg: cfg, limits: NewLimiters(maxLimiters)}
}

// Wrap puts h behind the guard.
func (g *Guard) Wrap(rt Route, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = &closeOnRefusal{ResponseWriter: w}
		if !rt.CrossSite && strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
			http.Error(w, "forbidden: a cross-site browser request (Sec-Fetch-Site: cross-site); the playground and the API answer their own pages only", http.StatusForbidden)
			return
		}
		if !rt.AnyHost && !g.HostAllowed(r.Host) {
			http.Error(w, "forbidden: Host "+r.Host+" is not one this server answers to (a DNS-rebinding guard); add it with --allowed-host", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !g.OriginAllowed(o, r.Host) {
			http.Error(w, "forbidden: Origin "+o+" is not allowed (set --allowed-origin)", http.StatusForbidden)
			return
		}
		max := g.cfg.MaxBody
		if rt.MaxBody > 0 {
			max = rt.MaxBody
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		principal := "anonymous"
		if rt.Auth != nil {
			p, ok := rt.Auth(w, r)
			if !ok {
				return
			}
			principal = p
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, principal))
		key := CallerKey(r, principal)
		if sid := r.Header.Get("Mcp-Session-Id"); rt.PerSession && sid != "" && (rt.SessionOwned == nil || rt.SessionOwned(sid, principal)) {
			key = "mcp:" + principal + ":" + sid
		}
		if !rt.NoRateLimit && !g.allow(key) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests from this caller: slow down (the limit is per MCP session or per client; --rate-limit)", http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// closeOnRefusal closes the connection of a refused request (401, 403,
// 429, 413): a caller turned away holds nothing of the server's, not even
// an idle keep-alive connection.
type closeOnRefusal struct{ http.ResponseWriter }

func (c *closeOnRefusal) WriteHeader(code int) {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests, http.StatusRequestEntityTooLarge:
		c.Header().Set("Connection", "close")
	}
	c.ResponseWriter.WriteHeader(code)
}

// Flush passes streaming on (SSE routes).
func (c *closeOnRefusal) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *closeOnRefusal) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type principalKey struct{}

// WithPrincipal names the principal of a request whose route
// authenticates by itself (after the guard), for what runs on its behalf.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// Principal is the principal the route's authentication named for the
// request whose context this is ("" outside the guard).
func Principal(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// CallerKey names a caller outside MCP, for rate limits and the sessions
// it may hold: its principal from its address (anonymous callers do not
// share one bucket, and no header a caller invents makes it a new one).
func CallerKey(r *http.Request, principal string) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return principal + "@" + host
}

func (g *Guard) allow(key string) bool {
	return g.limits.Delay(key, time.Duration(float64(time.Second)/g.cfg.Rate), g.cfg.Burst) == 0
}

// HostAllowed accepts IP literals (a rebinding page has a name, never an
// address), localhost, and the configured names.
func (g *Guard) HostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, a := range g.cfg.AllowedHosts {
		a = strings.TrimSuffix(strings.ToLower(a), ".")
		if ah, _, err := net.SplitHostPort(a); err == nil {
			a = ah
		}
		if a == "*" || a == host {
			return true
		}
	}
	return false
}

// OriginAllowed accepts loopback origins, the server's own (the Origin's
// host and port are the request's Host, which HostAllowed vetted), and the
// configured ones.
func (g *Guard) OriginAllowed(origin, requestHost string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return true
	}
	if strings.EqualFold(u.Host, requestHost) {
		return true
	}
	for _, a := range g.cfg.AllowedOrigins {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	return false
}
