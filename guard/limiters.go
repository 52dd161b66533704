package guard

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiters are rate limiters by key (a caller, a caller and a class of
// routes), bounded in number: a client that invents a new key per request
// (a new address from an IPv6 prefix, a new session id) cannot make the
// map grow without end. Past the bound, limiters idle for a minute go
// first, then the oldest half.
type Limiters struct {
	mu  sync.Mutex
	max int
	m   map[string]*limiter
}

type limiter struct {
	*rate.Limiter
	last time.Time
}

// NewLimiters keeps at most max limiters.
func NewLimiters(max int) *Limiters { return &Limiters{max: max, m: map[string]*limiter{}} }

// Delay takes a token from key's limiter (one token every `every`, bursts
// of burst, made on first use) and returns how long the caller must wait
// for one: 0 when it may go ahead (a refused request takes no token).
func (l *Limiters) Delay(key string, every time.Duration, burst int) time.Duration {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= l.max {
			l.evictLocked(now)
		}
		lim = &limiter{Limiter: rate.NewLimiter(rate.Every(every), max(burst, 1))}
		l.m[key] = lim
	}
	lim.last = now
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// Len is how many limiters are kept.
func (l *Limiters) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// evictLocked drops limiters idle for a minute, or the oldest half.
func (l *Limiters) evictLocked(now time.Time) {
	for k, lim := range l.m {
		if now.Sub(lim.last) > time.Minute {
			delete(l.m, k)
		}
	}
	if len(l.m) < l.max {
		return
	}
	var oldest time.Time
	for _, lim := range l.m {
		if oldest.IsZero() || lim.last.Before(oldest) {
			oldest = lim.last
		}
	}
	cut := oldest.Add(now.Sub(oldest) / 2)
	for k, lim := range l.m {
		if lim.last.Before(cut) {
			delete(l.m, k)
		}
	}
}
