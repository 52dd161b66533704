package mcpserver

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// mcpSessionIDs mints and checks the Mcp-Session-Id of 2025-11-25 clients:
// "mcp-session-<uuid>", or with a replica name "mcp-session-<replica>-<uuid>"
// so that a stock proxy can route every request of a session to the
// replica that created it. It remembers the ids it ended (a client that
// sends one is told its session is terminated) up to a bound, so a server
// that has served millions of sessions does not hold them all.
type mcpSessionIDs struct {
	prefix string

	mu         sync.Mutex
	live       map[string]bool
	terminated map[string]bool
	order      []string // terminated ids, oldest first
}

// maxTerminated bounds the ended ids remembered.
const maxTerminated = 10000

func newMCPSessionIDs(replica string) *mcpSessionIDs {
	p := "mcp-session-"
	if replica != "" {
		p += replica + "-"
	}
	return &mcpSessionIDs{prefix: p, live: map[string]bool{}, terminated: map[string]bool{}}
}

// Generate implements server.SessionIdManager.
func (m *mcpSessionIDs) Generate() string {
	id := m.prefix + uuid.NewString()
	m.mu.Lock()
	m.live[id] = true
	m.mu.Unlock()
	return id
}

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
	if !m.live[id] {
		return false, fmt.Errorf("session not found: %s", id)
	}
	return false, nil
}

// Terminate implements server.SessionIdManager.
func (m *mcpSessionIDs) Terminate(id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live[id] {
		return false, nil
	}
	delete(m.live, id)
	m.terminated[id] = true
	m.order = append(m.order, id)
	if len(m.order) > maxTerminated {
		delete(m.terminated, m.order[0])
		m.order = m.order[1:]
	}
	return false, nil
}
