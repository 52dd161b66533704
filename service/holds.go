package service

// Bounds on what a caller can make the server hold that is not a run or a
// workspace (those have their own): MCP sessions, event streams. Each kind
// has a server-wide cap and a cap per caller: per API key (at most its
// share of the server's), and for anonymous callers, who share one
// principal, per client address. So neither one key nor one address takes
// them all, and keys behind one address (an office's NAT) do not share a
// bound.

import (
	"sync"

	"github.com/srt-mcp/srt-mcp/errs"
)

// HoldLimit bounds one kind of held object.
type HoldLimit struct {
	What      string // "MCP sessions"
	Global    int    // in all (0: no bound)
	PerCaller int    // per key, and per address for anonymous callers (0: no bound but the share)
	// GlobalFlag and CallerFlag name the settings, for the refusal.
	GlobalFlag, CallerFlag string
	// Close says how a caller frees one.
	Close string
}

// Kinds of held objects.
const (
	HoldMCPSession  = "mcp_session"
	HoldEventStream = "event_stream"
)

type holds struct {
	mu     sync.Mutex
	counts map[string]*holdCount
}

type holdCount struct {
	all         int
	byPrincipal map[string]int
	byAddr      map[string]int // anonymous callers only
}

// Hold takes one object of kind for c, within the kind's bounds (in all;
// per key, at most its share of the server's; per address for anonymous
// callers), and returns the function that gives it back (safe to call more
// than once).
func (s *Service) Hold(kind string, c Caller) (release func(), err error) {
	l := s.cfg.Holds[kind]
	h := &s.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.counts[kind]
	if n == nil {
		n = &holdCount{byPrincipal: map[string]int{}, byAddr: map[string]int{}}
		h.counts[kind] = n
	}
	perPrincipal := s.share(l.Global)
	if l.PerCaller > 0 && (perPrincipal <= 0 || l.PerCaller < perPrincipal) {
		perPrincipal = l.PerCaller
	}
	switch {
	case l.Global > 0 && n.all >= l.Global:
		return nil, errs.New(errs.TooManySessions, "the server holds %d %s, its maximum (%s); close one, or retry later", n.all, l.What, l.GlobalFlag)
	case !c.Anonymous() && perPrincipal > 0 && n.byPrincipal[c.Principal] >= perPrincipal:
		return nil, errs.New(errs.TooManySessions, "this API key holds %d %s, the most one caller may (%s, and its share of %s); %s", n.byPrincipal[c.Principal], l.What, l.CallerFlag, l.GlobalFlag, l.Close)
	case c.Anonymous() && l.PerCaller > 0 && c.Addr != "" && n.byAddr[c.Addr] >= l.PerCaller:
		return nil, errs.New(errs.TooManySessions, "this address holds %d %s, the most one caller may (%s); %s", n.byAddr[c.Addr], l.What, l.CallerFlag, l.Close)
	}
	n.all++
	n.byPrincipal[c.Principal]++
	if c.Anonymous() {
		n.byAddr[c.Addr]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			n.all--
			if n.byPrincipal[c.Principal]--; n.byPrincipal[c.Principal] <= 0 {
				delete(n.byPrincipal, c.Principal)
			}
			if !c.Anonymous() {
				return
			}
			if n.byAddr[c.Addr]--; n.byAddr[c.Addr] <= 0 {
				delete(n.byAddr, c.Addr)
			}
		})
	}, nil
}
