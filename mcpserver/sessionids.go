package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/guard"
)

// mcpSessionIDs mints and checks the Mcp-Session-Id of 2025-11-25 clients
// ("mcp-session-<uuid>", or with a replica name
// "mcp-session-<replica>-<uuid>" so that a stock proxy can route every
// request of a session to the replica that created it) and the sessionId
// of the 2024-11-05 SSE transport.
//
// Each id is bound, when it is minted, to the principal whose request made
// it, and holds one place of the MCP sessions that principal and its
// address may have (service.HoldMCPSession) until it ends: another
// principal presenting it is answered as if it did not exist (see
// mcpFilter), and a flood of initialize requests stops at the bounds. It
// remembers the ids it ended (a client that sends one is told its session
// is terminated) up to a bound, so a server that has served millions of
// sessions does not hold them all.
type mcpSessionIDs struct {
	prefix string

	mu         sync.Mutex
	live       map[string]*mcpSessionOwner
	terminated map[string]bool
	order      []string // terminated ids, oldest first
}

// mcpSessionOwner is who minted a live id, and the place it holds.
type mcpSessionOwner struct {
	principal string
	release   func()
	sse       bool // an SSE stream's (POST /message), not a Streamable HTTP session
}

// maxTerminated bounds the ended ids remembered.
const maxTerminated = 10000

func newMCPSessionIDs(replica string) *mcpSessionIDs {
	p := "mcp-session-"
	if replica != "" {
		p += replica + "-"
	}
	return &mcpSessionIDs{prefix: p, live: map[string]*mcpSessionOwner{}, terminated: map[string]bool{}}
}

// placeKey carries, in an initialize request's context, the place the
// request holds for the session it is about to make.
type placeKey struct{}

// place is one held MCP session place; the id minted for the request
// takes it.
type place struct {
	mu      sync.Mutex
	release func()
	taken   bool
}

// take hands the place's release to the session that was minted.
func (p *place) take() func() {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.taken = true
	return p.release
}

// giveBack releases the place if no session took it (the request failed
// before an id was minted).
func (p *place) giveBack() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.taken {
		p.release()
	}
}

// bind mints an id for principal holding release.
func (m *mcpSessionIDs) bind(principal string, release func(), sse bool) string {
	id := m.prefix + uuid.NewString()
	m.mu.Lock()
	m.live[id] = &mcpSessionOwner{principal: principal, release: release, sse: sse}
	m.mu.Unlock()
	return id
}

// end forgets a live id and frees its place; terminate remembers it as
// ended.
func (m *mcpSessionIDs) end(id string, terminate bool) {
	m.mu.Lock()
	o := m.live[id]
	delete(m.live, id)
	if terminate && o != nil {
		m.terminated[id] = true
		m.order = append(m.order, id)
		if len(m.order) > maxTerminated {
			delete(m.terminated, m.order[0])
			m.order = m.order[1:]
		}
	}
	m.mu.Unlock()
	if o != nil && o.release != nil {
		o.release()
	}
}

// usable reports whether a request of principal may present id on its
// transport (sse: POST /message; else /mcp): not when it is a live session
// of another principal, or of the other transport. An id that is not live
// is for the transport to answer (not found, or terminated).
func (m *mcpSessionIDs) usable(id, principal string, sse bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.live[id]
	return o == nil || (o.principal == principal && o.sse == sse)
}

// Owned reports whether id is a live MCP session of principal (the guard
// rates an MCP session's requests by it only then: an invented id is no
// bucket of its own).
func (m *mcpSessionIDs) Owned(id, principal string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.live[id]
	return o != nil && o.principal == principal
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: a
// request's view binds the ids it mints to the request's principal; the
// idle sweeper (no request) gets the manager itself.
func (m *mcpSessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r == nil {
		return m
	}
	p, _ := r.Context().Value(placeKey{}).(*place)
	return &principalIDs{m: m, principal: principalOf(r), place: p}
}

// principalOf is the principal of a request behind the guard.
func principalOf(r *http.Request) string {
	if p := guard.Principal(r.Context()); p != "" {
		return p
	}
	return "anonymous"
}

// Generate implements server.SessionIdManager (unbound: not used for
// requests).
func (m *mcpSessionIDs) Generate() string { return m.bind("", func() {}, false) }

// Validate implements server.SessionIdManager.
func (m *mcpSessionIDs) Validate(id string) (bool, error) {
	rest, ok := strings.CutPrefix(id, m.prefix)
	if !ok {
		return false, fmt.Errorf("invalid session id: %s", id)
	}
	if _, err := uuid.Parse(rest); err != nil {
		return false, fmt.Errorf("invalid session id: %s", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.terminated[id] {
		return true, nil
	}
	if m.live[id] == nil {
		return false, fmt.Errorf("session not found: %s", id)
	}
	return false, nil
}

// Terminate implements server.SessionIdManager (the idle sweeper's).
func (m *mcpSessionIDs) Terminate(id string) (bool, error) {
	m.end(id, true)
	return false, nil
}

// principalIDs is the manager as one request sees it.
type principalIDs struct {
	m         *mcpSessionIDs
	principal string
	place     *place
}

// Generate implements server.SessionIdManager: the id belongs to the
// request's principal and takes the place its initialize holds.
func (v *principalIDs) Generate() string { return v.m.bind(v.principal, v.place.take(), false) }

// Validate implements server.SessionIdManager: another principal's live
// id, or an SSE stream's, is not found.
func (v *principalIDs) Validate(id string) (bool, error) {
	if !v.m.usable(id, v.principal, false) {
		return false, fmt.Errorf("session not found: %s", id)
	}
	return v.m.Validate(id)
}

// Terminate implements server.SessionIdManager: a DELETE ends only the
// principal's own Streamable HTTP session (mcpFilter answers any other
// first).
func (v *principalIDs) Terminate(id string) (bool, error) {
	if !v.m.usable(id, v.principal, false) {
		return true, nil
	}
	v.m.end(id, true)
	return false, nil
}

// sseIDs mints the 2024-11-05 transport's session ids, bound like the
// others: the stream holds its place until it closes (the unregister hook
// ends it).
func (m *mcpSessionIDs) sseIDs(ctx context.Context, r *http.Request) (string, error) {
	p, _ := r.Context().Value(placeKey{}).(*place)
	return m.bind(principalOf(r), p.take(), true), nil
}
