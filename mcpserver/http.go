package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/time/rate"
)

// HTTPConfig secures the Streamable HTTP door.
type HTTPConfig struct {
	// Token is the bearer token every request must carry; "" disables
	// authentication (the CLI allows that only on loopback binds or with
	// --insecure-no-auth).
	Token string
	// AllowedOrigins are the browser origins allowed to call (scheme://host
	// [:port]). Loopback origins are always allowed; a request without an
	// Origin header (not from a browser) is allowed.
	AllowedOrigins []string
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

// HTTPHandler serves MCP at /mcp and a liveness probe at /healthz.
func (s *Server) HTTPHandler(cfg HTTPConfig) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 20
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = 50
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 100
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
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.guard(cfg, streamable))
	mux.HandleFunc("/files/", s.serveFile)
	mux.Handle("/metrics", s.metricsHandler(cfg.MetricsToken))
	if s.data != nil {
		s.playgroundRoutes(mux, cfg.Token)
	}
	if lc := cfg.LibreChat; lc != nil && lc.Prefix != "" {
		prefix := "/" + strings.Trim(lc.Prefix, "/")
		mux.Handle(prefix+"/", http.StripPrefix(prefix, s.LibreChatHandler(*lc)))
	}
	mux.HandleFunc("/readyz", s.readyz)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "running_executions": s.mgr.Running(), "warm_pool_ready": s.pool.Ready()})
	})
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

// guard applies, in order: the body cap, Origin validation (403), bearer
// authentication (401), the per-principal rate limit (429), and drops
// sessionless notifications/cancelled (which mcp-go would match against
// any client's request ids).
func (s *Server) guard(cfg HTTPConfig, next http.Handler) http.Handler {
	var mu sync.Mutex
	limiters := map[string]*rate.Limiter{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, cfg.MaxBody)
		if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, cfg.AllowedOrigins) {
			http.Error(w, "forbidden: Origin "+o+" is not allowed (set --allowed-origin)", http.StatusForbidden)
			return
		}
		if cfg.Token != "" {
			got := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			if subtle.ConstantTimeCompare([]byte(got), []byte(cfg.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="srt-mcp"`)
				http.Error(w, "unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
				return
			}
		}
		p := principalOf(r, cfg.Token)
		mu.Lock()
		lim, ok := limiters[p]
		if !ok {
			lim = rate.NewLimiter(rate.Limit(cfg.RateLimit), cfg.Burst)
			limiters[p] = lim
		}
		mu.Unlock()
		if !lim.Allow() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
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

// originAllowed accepts loopback origins and the configured ones.
func originAllowed(origin string, allowed []string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), origin) || a == "*" {
			return true
		}
	}
	return false
}

// ServeStdio serves MCP on stdin/stdout until stdin closes; the stdio
// session's executions are cancelled then.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	std := server.NewStdioServer(s.mcp)
	server.WithWorkerPoolSize(64)(std)
	return std.Listen(ctx, in, out)
}
