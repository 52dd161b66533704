package mcpserver

import (
	"encoding/json"
	"testing"
	"time"
)

// README: "finished tasks are kept for their ttl". The ttl is counted from
// the task's creation, so a run longer than its ttl is dropped by the
// first sweep after it finishes (the client's next tasks/get): the client
// polls "working", then "Task not found", and never gets the result.
//
// Fails today.
func TestTaskLongRunKeptAfterFinishing(t *testing.T) {
	ts := &tasks{capable: map[string]bool{"s": true}, bySession: map[string][]*task{}}
	// A 2-minute run with the smallest ttl (1 minute), finished just now.
	tk := finishedTask("s", "alice", time.Now().Add(-2*time.Minute), minTaskTTL, json.RawMessage(`{}`))
	ts.bySession["s"] = []*task{tk}
	ts.mu.Lock()
	kept := ts.sweepLocked("s")
	ts.mu.Unlock()
	if len(kept) != 1 {
		t.Fatalf("a task that finished a moment ago was dropped before anyone could read its result (ttl %v counted from creation)", minTaskTTL)
	}
}
