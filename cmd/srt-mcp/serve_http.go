//go:build !embedserver

package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/srt-mcp/srt-mcp/apikeys"
	"github.com/srt-mcp/srt-mcp/downloads"
	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/mcpserver"
	"github.com/srt-mcp/srt-mcp/ops"
	"github.com/srt-mcp/srt-mcp/playground"
	"github.com/srt-mcp/srt-mcp/service"
)

// httpConfig secures the HTTP listener.
type httpConfig struct {
	// Token is the bearer token /mcp and the playground's API need; ""
	// disables it (allowed on loopback binds or with --insecure-no-auth).
	Token string
	// Keys are named API keys (--token-file), each a principal of its own;
	// accepted besides Token.
	Keys *apikeys.Keys
	// Replica names this server in the MCP session ids it mints.
	Replica string
	// AllowedOrigins are browser origins allowed besides loopback ones and
	// the server's own; a request without an Origin (not from a browser)
	// is allowed.
	AllowedOrigins []string
	// AllowedHosts are Host names answered besides IP literals and
	// localhost (a guard against DNS rebinding).
	AllowedHosts []string
	MaxBody      int64   // request body cap (4 MiB)
	RateLimit    float64 // requests per second per caller (50; burst 100)
	SessionTTL   time.Duration
	MetricsToken string
	LibreChat    *librechat.Config
}

// httpRoutes puts every front door on one mux, every route behind the same
// guard (package guard): Host and Origin checks, a body cap, the route's
// authentication, a per-caller rate limit. /mcp: MCP (and /mcp/events,
// seed 003's event stream; /sse and /message, MCP's 2024-11-05 transport); /files/: signed
// downloads; /metrics, /readyz, /healthz: operations; /: the playground;
// the LibreChat Code API under its prefix.
func httpRoutes(cfg httpConfig, svc *service.Service, srv *mcpserver.Server, o *ops.Ops) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 20
	}
	g := guard.New(guard.Config{AllowedOrigins: cfg.AllowedOrigins, AllowedHosts: cfg.AllowedHosts, MaxBody: cfg.MaxBody, Rate: cfg.RateLimit})
	// A route's API key: a named key or the single --token (package apikeys).
	bearer := func(refuse func(w http.ResponseWriter)) func(w http.ResponseWriter, r *http.Request) (string, bool) {
		return apikeys.Bearer(cfg.Token, cfg.Keys, refuse)
	}
	mcpAuth := bearer(func(w http.ResponseWriter) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="srt-mcp"`)
		http.Error(w, "unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.Wrap(guard.Route{Auth: mcpAuth, PerSession: true}, srv.Handler(mcpserver.HTTPConfig{SessionTTL: cfg.SessionTTL, Replica: cfg.Replica})))
	mux.Handle("/mcp/events", g.Wrap(guard.Route{Auth: mcpAuth}, srv.EventsHandler())) // seed 003's event stream
	sse, message := srv.SSEHandlers()                                                  // the 2024-11-05 HTTP+SSE transport
	mux.Handle("/sse", g.Wrap(guard.Route{Auth: mcpAuth}, sse))
	mux.Handle("/message", g.Wrap(guard.Route{Auth: mcpAuth}, message))
	mux.Handle("/files/", g.Wrap(guard.Route{CrossSite: true}, downloads.Handler(svc))) // the signed URL is the credential
	keyed := cfg.Token != "" || cfg.Keys != nil
	mux.Handle("/metrics", g.Wrap(guard.Route{Auth: ops.MetricsAuth(cfg.MetricsToken, keyed, mcpAuth)}, o.Metrics()))
	pgAuth := bearer(func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"enter the server's API key"}` + "\n"))
	})
	playground.Mount(mux, g, svc, pgAuth)
	if lc := cfg.LibreChat; lc != nil && lc.Prefix != "" {
		prefix := "/" + strings.Trim(lc.Prefix, "/")
		// The Code API authenticates (X-API-Key, JWT) and limits per class
		// by itself; a request's files total at most the upload cap.
		body := svc.Config().MaxUploadBytes + 1<<20
		mux.Handle(prefix+"/", g.Wrap(guard.Route{NoRateLimit: true, MaxBody: body}, http.StripPrefix(prefix, librechat.New(*lc, svc))))
	}
	probe := guard.Route{AnyHost: true, CrossSite: true}
	mux.Handle("/readyz", g.Wrap(probe, o.Readyz()))
	mux.Handle("/healthz", g.Wrap(probe, o.Healthz()))
	return collapseSlashes(mux)
}

// collapseSlashes turns "//" into "/" before routing: clients that join a
// base URL ending in "/" with "/exec" send "//exec", which ServeMux would
// answer with a redirect (and a POST redirected becomes a GET).
func collapseSlashes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "//") {
			p := r.URL.Path
			for strings.Contains(p, "//") {
				p = strings.ReplaceAll(p, "//", "/")
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = p, ""
			r = r2
		}
		h.ServeHTTP(w, r)
	})
}
