package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// finishedTask is a task whose handler has returned with reply, made by
// principal in session sid at created.
func finishedTask(sid, principal string, created time.Time, ttl time.Duration, reply json.RawMessage) *task {
	t := &task{session: sid, principal: principal, tool: "run_python", created: created, updated: time.Now(), ttl: ttl,
		started: make(chan struct{}), done: make(chan struct{}), reply: rpcReply{Result: reply}}
	close(t.started)
	close(t.done)
	return t
}

// A finished task keeps its whole tools/call reply in memory until its ttl
// (default 30 minutes, up to 2 hours): for run_python that is the reply's
// text twice (structuredContent and content[0], each up to ReplyChars)
// and up to maxPreviewsPerReply PNG previews of PreviewBytes each, base64.
// The store bounds them only per MCP session (maxFinishedTasks), and one
// key may hold 256 sessions (--max-mcp-sessions-per-caller), the server
// 4096: one key can make the server hold 256 x 32 such replies, outside
// the executions' own retained-output bound (256 MB for all principals,
// executions.Config.MaxRetainedBytes), which does not count them.
//
// Fails today: one principal's finished tasks hold ~6 GB.
func TestTaskRepliesBoundedPerPrincipal(t *testing.T) {
	const sessionsPerCaller = 256 // cmd/srt-mcp --max-mcp-sessions-per-caller default
	const allRetained = 256 << 20 // executions' MaxRetainedBytes default, for every principal together
	replyBytes := 2*DefaultReplyChars + maxPreviewsPerReply*base64.StdEncoding.EncodedLen(64<<10)
	big := json.RawMessage(make([]byte, replyBytes)) // shared: the test counts, it does not allocate 6 GB

	ts := &tasks{capable: map[string]bool{}, bySession: map[string][]*task{}}
	for s := range sessionsPerCaller {
		sid := fmt.Sprintf("mcp-session-%d", s)
		ts.capable[sid] = true
		for range maxFinishedTasks + 4 {
			if !ts.add(finishedTask(sid, "alice", time.Now(), maxTaskTTL, big)) {
				t.Fatal("add refused a live session's task")
			}
		}
	}
	held := 0
	for _, list := range ts.bySession {
		for _, tk := range list {
			if tk.principal == "alice" {
				held += len(tk.reply.Result) + len(tk.reply.Error)
			}
		}
	}
	if held > allRetained {
		t.Fatalf("one principal's finished tasks hold %d MB of replies (%d per session x %d sessions x %d KB), more than the %d MB all executions' output may hold",
			held>>20, maxFinishedTasks, sessionsPerCaller, replyBytes>>10, allRetained>>20)
	}
}
