package server

import (
	"net/http"
	"strings"

	"github.com/srt-mcp/srt-mcp/apikeys"
	"github.com/srt-mcp/srt-mcp/downloads"
	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/mcpserver"
	"github.com/srt-mcp/srt-mcp/ops"
	"github.com/srt-mcp/srt-mcp/playground"
	"github.com/srt-mcp/srt-mcp/service"
)

// routes puts every front door on one mux, every route behind the same
// guard (package guard): Host and Origin checks, a body cap, the route's
// authentication, a per-caller rate limit. /mcp: MCP (and /mcp/events,
// seed 003's event stream; /sse and /message, MCP's 2024-11-05 transport); /files/: signed
// downloads; /metrics, /readyz, /healthz: operations; /: the playground;
// the LibreChat Code API under its prefix. Of o it reads the HTTP fields.
func routes(o *Options, svc *service.Service, srv *mcpserver.Server, m *ops.Ops) http.Handler {
	maxBody := o.MaxBody
	if maxBody <= 0 {
		maxBody = 4 << 20
	}
	g := guard.New(guard.Config{AllowedOrigins: o.AllowedOrigins, AllowedHosts: o.AllowedHosts, MaxBody: maxBody, Rate: o.RateLimit})
	// A route's API key: a named key or the single --token (package apikeys).
	bearer := func(refuse func(w http.ResponseWriter)) func(w http.ResponseWriter, r *http.Request) (string, bool) {
		return apikeys.Bearer(o.Token, o.Keys, refuse)
	}
	mcpAuth := bearer(func(w http.ResponseWriter) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="srt-mcp"`)
		http.Error(w, "unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
	})
	mux := http.NewServeMux()
	// An MCP request is rated by its Mcp-Session-Id only when that is a live
	// session of its principal: an invented id per request is no fresh bucket.
	mcpRoute := guard.Route{Auth: mcpAuth, PerSession: true, SessionOwned: srv.SessionOwned}
	mux.Handle("/mcp", g.Wrap(mcpRoute, srv.Handler(mcpserver.HTTPConfig{SessionTTL: o.MCPSessionTTL, Replica: o.Replica})))
	mux.Handle("/mcp/events", g.Wrap(guard.Route{Auth: mcpAuth}, srv.EventsHandler())) // seed 003's event stream
	sse, message := srv.SSEHandlers()                                                  // the 2024-11-05 HTTP+SSE transport
	mux.Handle("/sse", g.Wrap(guard.Route{Auth: mcpAuth}, sse))
	mux.Handle("/message", g.Wrap(guard.Route{Auth: mcpAuth}, message))
	mux.Handle("/files/", g.Wrap(guard.Route{CrossSite: true}, downloads.Handler(svc))) // the signed URL is the credential
	keyed := o.Token != "" || o.Keys != nil
	mux.Handle("/metrics", g.Wrap(guard.Route{Auth: ops.MetricsAuth(o.MetricsToken, keyed, mcpAuth)}, m.Metrics()))
	pgAuth := bearer(func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"enter the server's API key"}` + "\n"))
	})
	playground.Mount(mux, g, svc, pgAuth)
	if lc := o.LibreChat; lc != nil && lc.Prefix != "" {
		prefix := "/" + strings.Trim(lc.Prefix, "/")
		// The Code API authenticates (X-API-Key, JWT) and limits per class
		// by itself; a request's files total at most the upload cap.
		body := svc.Config().MaxUploadBytes + 1<<20
		mux.Handle(prefix+"/", g.Wrap(guard.Route{NoRateLimit: true, MaxBody: body}, http.StripPrefix(prefix, librechat.New(*lc, svc))))
	}
	probe := guard.Route{AnyHost: true, CrossSite: true}
	mux.Handle("/readyz", g.Wrap(probe, m.Readyz()))
	mux.Handle("/healthz", g.Wrap(probe, m.Healthz()))
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
