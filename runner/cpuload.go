package runner

import (
	"sync"
	"time"
)

// prestartBusyLimit is the machine's busy share above which the pool
// starts no sandbox ahead of a run by default (--sandbox-pool-cpu): on a saturated machine a sandbox
// started ahead takes the CPU of one started for its run, nothing is won,
// and those still starting when their run comes are wasted (measured: 10
// clients running cold commands back to back on 2 cores, 43 runs/s
// without the pool, 36 with it before this limit).
const prestartBusyLimit = 0.85

// cpuGauge is the machine's CPU use over the last moments: the busy share
// since its previous look, looked at most every cpuGaugePeriod.
type cpuGauge struct {
	mu          sync.Mutex
	at          time.Time
	idle, total uint64
	busy        float64
}

const cpuGaugePeriod = 250 * time.Millisecond

// Busy is the share of the machine's CPU time (0 to 1) that was not idle
// since the previous look; 0 where it cannot be read.
func (g *cpuGauge) Busy() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.at) < cpuGaugePeriod {
		return g.busy
	}
	idle, total, ok := cpuTimes()
	if !ok {
		return 0
	}
	if total > g.total && !g.at.IsZero() {
		g.busy = 1 - float64(idle-g.idle)/float64(total-g.total)
	}
	g.at, g.idle, g.total = time.Now(), idle, total
	return g.busy
}
