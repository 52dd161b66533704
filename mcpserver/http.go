package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/guard"
)

// HTTPConfig secures the Streamable HTTP door.
type HTTPConfig struct {
	// Token is the bearer token every request must carry; "" disables
	// authentication (the CLI allows that only on loopback binds or with
	// --insecure-no-auth).
	Token string
	// AllowedOrigins are the browser origins allowed to call (scheme://host
	// [:port]). Loopback origins and the server's own are always allowed; a
	// request without an Origin header (not from a browser) is allowed.
	AllowedOrigins []string
	// AllowedHosts are the Host names the server answers to besides IP
	// literals and localhost (a guard against DNS rebinding).
	AllowedHosts []string
	// MaxBody caps a request body (default 4 MiB).
	MaxBody int64
	// RateLimit is requests per second per principal (0: default 50), with
	// Burst (default 100).
	RateLimit float64
	Burst     int
	// SessionTTL frees idle MCP sessions (and cancels their executions).
	SessionTTL time.Duration
	// MetricsToken, when set, is the bearer token /metrics needs.
	MetricsToken string
	// LibreChat, when set, mounts the LibreChat-compatible Code API.
	LibreChat *LibreChatConfig
}

type principalKey struct{}

func principalFrom(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok {
		return p
	}
	return "local"
}

// ownerFor names who owns an execution: the MCP session when there is one
// (session ids are unguessable and every request is authenticated), else
// the authenticated principal (2026-07-28 clients have no sessions).
func ownerFor(sessionID, principal string) string {
	if sessionID != "" {
		return "session:" + sessionID
	}
	return "principal:" + principal
}

func ownerFrom(ctx context.Context) string {
	sid := ""
	if sess := server.ClientSessionFromContext(ctx); sess != nil {
		sid = sess.SessionID()
	}
	return ownerFor(sid, principalFrom(ctx))
}

// HTTPHandler serves MCP at /mcp, signed downloads, metrics, readiness and
// liveness, the playground and the LibreChat Code API, every route behind
// the same guard (package guard): Host and Origin checks, a body cap, the
// route's authentication, a per-caller rate limit.
func (s *Server) HTTPHandler(cfg HTTPConfig) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 20
	}
	ttl := cfg.SessionTTL
	if ttl <= 0 {
		ttl = 30 * time.Minute
	}
	if max := s.cfg.Ceiling.Limits.Timeout.Std() + 5*time.Minute; ttl < max {
		ttl = max // never expire a session in the middle of a call
	}
	streamable := server.NewStreamableHTTPServer(s.mcp,
		server.WithStateful(true),
		server.WithDisableStreaming(true),
		server.WithSessionIdleTTL(ttl),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, principalKey{}, principalOf(r, cfg.Token))
		}),
	)
	g := guard.New(guard.Config{AllowedOrigins: cfg.AllowedOrigins, AllowedHosts: cfg.AllowedHosts, MaxBody: cfg.MaxBody,
		Rate: cfg.RateLimit, Burst: cfg.Burst})
	bearer := func(refuse func(w http.ResponseWriter)) func(w http.ResponseWriter, r *http.Request) (string, bool) {
		return func(w http.ResponseWriter, r *http.Request) (string, bool) {
			if cfg.Token != "" {
				got := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
				if subtle.ConstantTimeCompare([]byte(got), []byte(cfg.Token)) != 1 {
					refuse(w)
					return "", false
				}
			}
			return principalOf(r, cfg.Token), true
		}
	}
	mcpAuth := bearer(func(w http.ResponseWriter) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="srt-mcp"`)
		http.Error(w, "unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.Wrap(guard.Route{Auth: mcpAuth}, mcpFilter(streamable)))
	mux.Handle("/files/", g.Wrap(guard.Route{}, http.HandlerFunc(s.serveFile))) // the signed URL is the credential
	mux.Handle("/metrics", g.Wrap(guard.Route{}, s.metricsHandler(cfg.MetricsToken)))
	if s.data != nil {
		pgAuth := bearer(func(w http.ResponseWriter) { lcError(w, http.StatusUnauthorized, "enter the server's API key") })
		s.playgroundRoutes(mux, g, pgAuth)
	}
	if lc := cfg.LibreChat; lc != nil && lc.Prefix != "" {
		prefix := "/" + strings.Trim(lc.Prefix, "/")
		// The Code API authenticates (X-API-Key, JWT) and limits per class
		// by itself; uploads may be as large as the upload cap.
		body := int64(0)
		if s.data != nil {
			body = s.data.MaxUploadBytes + 1<<20 // a request's files total at most the upload cap
		}
		mux.Handle(prefix+"/", g.Wrap(guard.Route{NoRateLimit: true, MaxBody: body}, http.StripPrefix(prefix, s.LibreChatHandler(*lc))))
	}
	probe := guard.Route{AnyHost: true}
	mux.Handle("/readyz", g.Wrap(probe, http.HandlerFunc(s.readyz)))
	mux.Handle("/healthz", g.Wrap(probe, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "running_executions": s.mgr.Running(), "warm_pool_ready": s.pool.Ready()})
	})))
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

// principalOf identifies the caller: a hash of its token, or "anonymous".
func principalOf(r *http.Request, token string) string {
	if token == "" {
		return "anonymous"
	}
	sum := sha256.Sum256([]byte(token))
	return "bearer:" + hex.EncodeToString(sum[:8])
}

// mcpFilter drops sessionless notifications/cancelled, which mcp-go would
// match against any client's request ids.
func mcpFilter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			var msg struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "notifications/cancelled" {
				// Without a session the request id is ambiguous across
				// clients; for 2026-07-28 clients, disconnecting cancels.
				w.WriteHeader(http.StatusAccepted)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// ServeStdio serves MCP on stdin/stdout until stdin closes; the stdio
// session's executions are cancelled then.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	std := server.NewStdioServer(s.mcp)
	server.WithWorkerPoolSize(64)(std)
	return std.Listen(ctx, in, out)
}
