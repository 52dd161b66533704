package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/service"
)

// HTTPConfig configures the Streamable HTTP door.
type HTTPConfig struct {
	// SessionTTL frees idle MCP sessions (and cancels their executions);
	// the command makes sure it outlasts the longest call.
	SessionTTL time.Duration
	// Replica, when set, is named in every Mcp-Session-Id minted here.
	Replica string
}

// Handler serves MCP's Streamable HTTP transport (mounted at /mcp).
//
// Three kinds of caller POST there. A 2025-11-25 client initializes and
// then sends its Mcp-Session-Id: the stateful server. A 2026-07-28 client
// marks every request as such and has no session: mcp-go serves it on the
// same server, sessionless. And a plain JSON-RPC caller (seed 003 §7.1: one
// tools/call with a bearer token, no initialize, no protocol version) is
// served by a stateless server on the same tools, with a JSON reply; all
// sessionless callers keep their state in handles (see caller.go).
func (s *Server) Handler(cfg HTTPConfig) http.Handler {
	ttl := cfg.SessionTTL
	if ttl <= 0 {
		ttl = 30 * time.Minute
	}
	s.ids.prefix = newMCPSessionIDs(cfg.Replica).prefix
	streamable := server.NewStreamableHTTPServer(s.mcp,
		server.WithSessionIdManagerResolver(s.ids),
		server.WithDisableStreaming(true),
		server.WithSessionIdleTTL(ttl),
		server.WithHTTPContextFunc(httpCaller),
	)
	plain := server.NewStreamableHTTPServer(s.mcp,
		server.WithStateLess(true),
		server.WithDisableStreaming(true),
		server.WithHTTPContextFunc(httpCaller),
	)
	return s.mcpFilter(streamable, plain)
}

// maxInitParams bounds what an initialize carries (clientInfo,
// capabilities, _meta): the server keeps it for the session's life.
const maxInitParams = 8 << 10

// rpcMessage is the part of a JSON-RPC message the filters read: its method
// alone decides what it is, however its params are shaped (mcp-go reads
// it the same way).
type rpcMessage struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readBody reads r's body (within the guard's cap) for a filter to look at,
// and puts it back for the handler after it; a body past the cap is
// answered 413.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// mayBeInitialize reports whether body could decode to an initialize: its
// method's value is the bytes "initialize" or spelt with \u escapes (no
// other JSON escape makes a letter). A session's tools/call, the hot path,
// skips the parse.
func mayBeInitialize(body []byte) bool {
	return bytes.Contains(body, []byte("initialize")) || bytes.Contains(body, []byte(`\u`))
}

// admit checks an initialize (on /mcp or an SSE stream's /message) before
// it makes a session: refused while the server drains, or past
// maxInitParams; it takes a place among the caller's MCP sessions (nil
// place: the caller holds its stream's already). It answers the refusal
// itself and returns ok false.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, body []byte, params json.RawMessage, take bool) (*place, bool) {
	if s.svc.Draining() {
		refuse(w, body, http.StatusServiceUnavailable, errs.Of(service.ErrDraining).Error())
		return nil, false
	}
	if len(params) > maxInitParams {
		refuse(w, body, http.StatusRequestEntityTooLarge, fmt.Sprintf("initialize's params (clientInfo, capabilities) are %d bytes, more than the %d a session may keep; send a shorter clientInfo",
			len(params), maxInitParams))
		return nil, false
	}
	if !take {
		return nil, true
	}
	release, err := s.svc.Hold(service.HoldMCPSession, service.CallerOf(guard.Principal(r.Context()), r.RemoteAddr))
	if err != nil {
		refuse(w, body, errs.Of(err).Status(), errs.Of(err).Error())
		return nil, false
	}
	return &place{release: release}, true
}

// mcpFilter answers, before mcp-go sees the request, what mcp-go cannot
// tell: a request naming another principal's MCP session (or an SSE
// stream's, which is not a Streamable HTTP session) is told it does not
// exist; every initialize, whatever else the request carries, is admitted
// (a drain, the bounds, maxInitParams) and takes a place among the
// caller's MCP sessions; a plain JSON-RPC request goes to the stateless
// server; a sessionless notifications/cancelled, which mcp-go would match
// against any client's request ids, is dropped.
func (s *Server) mcpFilter(next, plain http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		if sid != "" && !s.ids.usable(sid, principalOf(r), false) {
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		if sid != "" && s.tasks.serve(w, r, next, sid, body) {
			return // a task message of a session offered tasks (tasks.go)
		}
		if sid != "" && !mayBeInitialize(body) {
			next.ServeHTTP(w, r) // a session's call: nothing here to admit
			return
		}
		var msg rpcMessage
		parsed := json.Unmarshal(body, &msg) == nil
		if parsed && msg.Method == "initialize" {
			p, ok := s.admit(w, r, body, msg.Params, true)
			if !ok {
				return
			}
			defer p.giveBack()
			r = r.WithContext(context.WithValue(r.Context(), placeKey{}, p))
		}
		if sid != "" {
			next.ServeHTTP(w, r)
			return
		}
		if parsed && msg.Method == "notifications/cancelled" {
			// Without a session the request id is ambiguous across
			// clients; for 2026-07-28 clients, disconnecting cancels.
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var meta struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(msg.Params, &meta)
		_, modern := meta.Meta["io.modelcontextprotocol/protocolVersion"]
		modern = modern || r.Header.Get("MCP-Protocol-Version") >= "2026-07-28"
		if parsed && modern {
			s.fillStandardHeaders(r, msg.Method, body)
		}
		if parsed && msg.Method != "" && msg.Method != "initialize" && !modern {
			if r.Header.Get("Accept") == "" || r.Header.Get("Accept") == "*/*" {
				r.Header.Set("Accept", "application/json, text/event-stream")
			}
			plain.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fillStandardHeaders serves a 2026-07-28 request whose client left out
// the headers that mirror its body (Mcp-Method, Mcp-Name, and the
// Mcp-Param-* of routable arguments: mcp-remote 0.15.1 sends none of them,
// the Go SDK none before its first tools/list) from the body itself: the
// body is what the server acts on, and a header that is there and
// contradicts it is still refused (-32020, by mcp-go). Without this such a
// client could use no handle at all.
func (s *Server) fillStandardHeaders(r *http.Request, method string, body []byte) {
	var msg struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return
	}
	set := func(name, value string) {
		if len(r.Header.Values(name)) == 0 {
			r.Header.Set(name, value)
		}
	}
	for k, v := range mcp.StandardHeaders(mcp.ProtocolVersion20260728, mcp.MCPMethod(method), msg.Params) {
		set(k, v)
	}
	if method != string(mcp.MethodToolsCall) {
		return
	}
	var call struct {
		Name      string                     `json:"name"`
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(msg.Params, &call) != nil {
		return
	}
	st := s.mcp.GetTool(call.Name)
	if st == nil {
		return
	}
	for _, b := range mcp.ExtractParamHeaderBindings(&st.Tool) {
		if len(b.Path) != 1 {
			continue
		}
		raw, ok := call.Arguments[b.Path[0]]
		if !ok || string(raw) == "null" {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		if enc, ok := mcp.EncodeHeaderValue(v); ok {
			set(b.HeaderName(), enc)
		}
	}
}

// refuse answers an initialize the server will not serve (a drain, a
// bound): the status, Retry-After, and a JSON-RPC error that says why
// (every MCP client shows the message).
func refuse(w http.ResponseWriter, body []byte, status int, message string) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &req)
	if len(req.ID) == 0 {
		req.ID = json.RawMessage("null")
	}
	w.Header().Set("Retry-After", "1")
	writeRPCStatus(w, status, req.ID, rpcReply{Error: rpcErrorObject(rpcServerError, message)})
}

// heartbeat is how often an events stream says it is alive.
const heartbeat = 15 * time.Second

// EventsHandler is seed 003's GET /mcp/events: a Server-Sent Events stream
// for JSON-RPC notifications. srt-mcp sends its notifications on the
// request they belong to, so the stream carries heartbeats (SSE comments)
// that keep proxies from closing it; it ends when the client goes away or
// the server shuts down.
func (s *Server) EventsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "GET /mcp/events opens an event stream", http.StatusMethodNotAllowed)
			return
		}
		fl, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
			return
		}
		release, err := s.svc.Hold(service.HoldEventStream, service.CallerOf(guard.Principal(r.Context()), r.RemoteAddr))
		if err != nil {
			http.Error(w, errs.Of(err).Message, errs.Of(err).Status())
			return
		}
		defer release()
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": srt-mcp events (heartbeats every 15 s)\nretry: 5000\n\n")
		fl.Flush()
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-s.closing:
				return
			case now := <-t.C:
				if _, err := io.WriteString(w, ": heartbeat "+now.UTC().Format(time.RFC3339)+"\n\n"); err != nil {
					return
				}
				fl.Flush()
			}
		}
	})
}

// SSEHandlers serve the 2024-11-05 HTTP+SSE transport (GET /sse opens the
// stream, POST /message?sessionId=… carries requests) on the same tools:
// some n8n and desktop client versions speak nothing else. Each SSE
// connection is an MCP session of its own.
func (s *Server) SSEHandlers() (sse, message http.Handler) {
	srv := server.NewSSEServer(s.mcp,
		server.WithSSEEndpoint("/sse"),
		server.WithMessageEndpoint("/message"),
		server.WithKeepAlive(true),
		server.WithKeepAliveInterval(heartbeat),
		server.WithSSEContextFunc(httpCaller),
		server.WithSessionIDGenerator(s.ids.sseIDs),
		// The guard in front checks Host and Origin for every route.
		server.WithSSEDisableLocalhostProtection(true),
	)
	s.sse = srv
	// Each stream is an MCP session: it takes a place among its caller's,
	// and its id answers its own principal only.
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.svc.Draining() {
			http.Error(w, errs.Of(service.ErrDraining).Error(), http.StatusServiceUnavailable)
			return
		}
		release, err := s.svc.Hold(service.HoldMCPSession, service.CallerOf(guard.Principal(r.Context()), r.RemoteAddr))
		if err != nil {
			http.Error(w, errs.Of(err).Message, errs.Of(err).Status())
			return
		}
		p := &place{release: release}
		defer p.giveBack()
		srv.SSEHandler().ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), placeKey{}, p)))
	})
	messages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.ids.usable(r.URL.Query().Get("sessionId"), principalOf(r), true) {
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		// An initialize on a stream: the stream holds its place already,
		// but what it may keep of the client is bounded the same way.
		var msg rpcMessage
		if mayBeInitialize(body) && json.Unmarshal(body, &msg) == nil && msg.Method == "initialize" {
			if _, ok := s.admit(w, r, body, msg.Params, false); !ok {
				return
			}
		}
		srv.MessageHandler().ServeHTTP(w, r)
	})
	return stream, messages
}

// SessionOwned reports whether id is a live MCP session (Streamable HTTP
// or SSE) of principal: the guard gives only such an id a rate-limit
// bucket of its own.
func (s *Server) SessionOwned(id, principal string) bool { return s.ids.Owned(id, principal) }

// CloseStreams ends the long-lived streams (events, SSE) so that an HTTP
// server shutting down does not wait for them.
func (s *Server) CloseStreams(ctx context.Context) {
	s.closeOnce.Do(func() { close(s.closing) })
	if s.sse != nil {
		_ = s.sse.Shutdown(ctx)
	}
}

// ServeStdio serves MCP on stdin/stdout until stdin closes; the stdio
// session's executions are cancelled then.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	std := server.NewStdioServer(s.mcp)
	server.WithWorkerPoolSize(64)(std)
	return std.Listen(ctx, in, out)
}

// JSON-RPC error codes the door answers with itself (refusals, tasks).
const (
	rpcServerError    = -32000 // the server will not serve it now (drain, bounds)
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternalError  = -32603
)

// rpcReply is a JSON-RPC response's outcome: its result or its error.
type rpcReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func rpcErrorObject(code int, message string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"code": code, "message": message})
	return b
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	writeRPCReply(w, id, rpcReply{Error: rpcErrorObject(code, message)})
}

func writeRPCResult(w http.ResponseWriter, id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		writeRPCError(w, id, rpcInternalError, err.Error())
		return
	}
	writeRPCReply(w, id, rpcReply{Result: b})
}

// writeRPCReply answers the request id with reply, as JSON.
func writeRPCReply(w http.ResponseWriter, id json.RawMessage, reply rpcReply) {
	writeRPCStatus(w, http.StatusOK, id, reply)
}

// writeRPCStatus answers the request id with reply and the HTTP status.
func writeRPCStatus(w http.ResponseWriter, status int, id json.RawMessage, reply rpcReply) {
	msg := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		rpcReply
	}{"2.0", id, reply}
	b, err := json.Marshal(msg)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
