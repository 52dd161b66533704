package service

import (
	"context"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/sessions"
)

// PreloadModules are imported by a warm pool's kernels ahead of use.
var PreloadModules = []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot", "seaborn"}

// pool keeps a few sessions ready: a fresh workspace each, with a Python
// kernel that has already imported the data stack. A new workspace claims
// one instead of starting cold; the pool refills in the background, one
// at a time. Pooled sessions do not count against the session cap. At
// shutdown the pool stops filling and closes the sessions still waiting.
type pool struct {
	s     *Service
	size  int
	mu    sync.Mutex
	ready []*sessions.Session
	gen   uint64 // ceiling changes seen: a session started before one is not kept
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (s *Service) startPool(size int) {
	if size <= 0 {
		return
	}
	p := &pool{s: s, size: size, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.pool = p
	go p.loop()
}

func (p *pool) loop() {
	defer close(p.done)
	backoff := time.Second
	for {
		p.mu.Lock()
		need := len(p.ready) < p.size
		p.mu.Unlock()
		if need {
			if err := p.fill(); err != nil {
				p.s.cfg.Logger.Warn("warm pool: could not prepare a session", "error", err)
				select {
				case <-p.stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Minute)
				continue
			}
			backoff = time.Second
			continue
		}
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
	}
}

func (p *pool) fill() error {
	select {
	case <-p.stop:
		return nil
	default:
	}
	gen := p.generation()
	ss, err := p.s.reg.CreatePooled()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { // shutdown does not wait for a kernel's start
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	k, _, err := p.s.kernelFor(ctx, ss, "python")
	if err == nil {
		err = k.Preload(ctx, PreloadModules)
	}
	if err != nil {
		_ = p.s.reg.Close(ss.ID)
		return err
	}
	p.mu.Lock()
	select {
	case <-p.stop:
		p.mu.Unlock()
		_ = p.s.reg.Close(ss.ID)
		return nil
	default:
	}
	if p.gen != gen { // the ceiling changed while it started: made under the old one
		p.mu.Unlock()
		_ = p.s.reg.Close(ss.ID)
		return nil
	}
	p.ready = append(p.ready, ss)
	p.mu.Unlock()
	return nil
}

func (p *pool) generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// drain closes the sessions waiting in the pool (the ceiling changed: their
// interpreters started under the old one) and has it refill.
func (p *pool) drain() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.gen++
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, ss := range ready {
		_ = p.s.reg.Close(ss.ID)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take claims a ready session for principal, or returns nil when the pool
// is empty (or the cap is reached: the caller then gets the same error
// creating one).
func (p *pool) take(principal string) *sessions.Session {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	var ss *sessions.Session
	for len(p.ready) > 0 && ss == nil {
		ss = p.ready[0]
		p.ready = p.ready[1:]
		if err := p.s.reg.Claim(ss, principal); err != nil {
			p.ready = append([]*sessions.Session{ss}, p.ready...)
			ss = nil
			break
		}
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return ss
}

// Ready is how many sessions wait in the pool.
func (p *pool) Ready() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// close stops the pool, waits for its loop, and closes the sessions
// waiting in it (their kernels with them).
func (p *pool) close() {
	if p == nil {
		return
	}
	p.once.Do(func() { close(p.stop) })
	<-p.done
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, ss := range ready {
		_ = p.s.reg.Close(ss.ID)
	}
}
