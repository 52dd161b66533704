package mcpserver

// MCP tasks (SEP-1686, protocol 2025-11-25) for execute_code and
// run_python: a client that declares the tasks capability may send
// tools/call with a "task" field, get a task back at once, and poll it
// with tasks/get, wait for it with tasks/result, find it with tasks/list
// and stop it with tasks/cancel. The task's id is the execution's id, so
// the execution tools (get_execution_output, send_stdin, cancel_execution)
// reach the same run.
//
// Why not mcp-go's own tasks (server.WithTaskCapabilities and a tool's
// execution.taskSupport): in v1.2.1 it mints its own task ids (a UUID,
// with no hook to choose one), runs the handler on a context derived from
// the request's, which HandleMessage cancels as soon as it has answered
// the tools/call, isolates tasks only between two callers that both have
// an MCP session (a sessionless request sees everyone's), knows no
// principal, bounds tasks only server-wide, and broadcasts every status
// change to every connected client. So the tools are registered without
// execution.taskSupport (mcp-go then ignores a "task" field and answers
// synchronously, as the spec asks of a server that did not offer tasks),
// and this file answers the task messages of a Streamable HTTP session
// whose client declared tasks, before mcp-go sees them (mcpFilter calls
// serve). Only such sessions are offered tasks: their initialize reply
// carries the capability and their tools/list the taskSupport; every
// other client sees the server as before.
//
// A task is the synchronous tools/call run in the background: the same
// message, without "task", through mcp-go's HandleMessage (middleware and
// all), on a context that carries the caller and this task. The handler
// reports the run it started (taskStarted, in finish and run_python);
// only then is the task created, with the run's execution id, and its
// result is exactly the JSON-RPC response the synchronous call would have
// returned. A call that fails before it starts a run (bad arguments, no
// slot) is answered with that synchronous reply: there is no execution
// whose id the task could have.
//
// Ownership and bounds: a task belongs to the MCP session that made it,
// which is bound to its principal (sessionids.go); every task message is
// looked up in the asking session's own tasks and checked against its
// principal, so another session or key is told the task does not exist
// (-32602), and tasks/list shows a session only its own. Running tasks are
// bounded by the executions a principal may run (the service refuses the
// run, and then no task is made); finished ones are kept for their ttl,
// at most maxFinishedTasks per session, and all of a session's end with
// it (running ones are cancelled).
//
// Status: working while the handler runs; completed when the command
// exited and the reply is no error; failed for a timeout, a sandbox that
// failed, an isError reply or a JSON-RPC error; cancelled after
// tasks/cancel (or cancel_execution). input_required is never reported:
// nothing tells the server that a sandboxed program is blocked reading
// its terminal, so an interactive run stays working and its status
// message says to answer it with send_stdin and the execution id.
//
// Not sent: notifications/tasks/status (optional in the spec). With
// streaming disabled a session's notifications ride on its next POST's
// response, where they would only add noise; clients poll tasks/get.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/service"
)

// taskTools are the tools offered as tasks.
var taskTools = map[string]bool{"execute_code": true, "run_python": true}

const (
	// taskPollInterval is the polling interval tasks suggest.
	taskPollInterval = time.Second
	// defaultTaskTTL is how long a task is kept when the client asks for
	// no ttl; a requested one is held within [minTaskTTL, maxTaskTTL].
	defaultTaskTTL = 30 * time.Minute
	minTaskTTL     = time.Minute
	maxTaskTTL     = 2 * time.Hour
	// maxFinishedTasks bounds the finished tasks (and their replies) one
	// session keeps; the oldest goes first.
	maxFinishedTasks = 32
	// maxHeldPerPrincipal and maxHeldReplies bound the bytes of finished
	// tasks' replies one key, and all keys, make the server hold (a key
	// may hold hundreds of sessions, a run_python reply with previews is
	// most of a megabyte); past them the task that finished first is
	// forgotten (its execution stays readable for the retention time).
	maxHeldPerPrincipal = 32 << 20
	maxHeldReplies      = 256 << 20
	// taskPageSize is how many tasks one tasks/list page holds.
	taskPageSize = 50
)

// tasks is the MCP door's task store.
type tasks struct {
	s *Server

	mu sync.Mutex
	// capable are the Streamable HTTP sessions whose client declared
	// tasks (and so was offered them).
	capable map[string]bool
	// bySession are each session's tasks, oldest first.
	bySession map[string][]*task
	// heldBy and held are the bytes of the replies finished tasks keep,
	// per principal and in all.
	heldBy map[string]int
	held   int
}

// task is one task-augmented tools/call.
type task struct {
	session   string
	principal string
	tool      string
	// interactive: execute_code on a pseudo-terminal (its status message
	// says to answer it with send_stdin).
	interactive bool
	created     time.Time
	ttl         time.Duration

	ctx    context.Context
	cancel context.CancelFunc

	// started is closed once the handler started its run (exec is set
	// then); done once the handler returned (reply is set then).
	startOnce sync.Once
	started   chan struct{}
	exec      *service.Execution
	done      chan struct{}

	mu        sync.Mutex
	reply     rpcReply
	isError   bool
	cancelled bool
	updated   time.Time

	// heldBytes is what the reply counts in the store's bounds (under
	// tasks.mu; 0 until it is counted).
	heldBytes int
}

// id is the task's id: its execution's.
func (t *task) id() string { return t.exec.ID() }

// finishedAt is when the task's handler returned (its last update).
func (t *task) finishedAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.updated
}

// finished reports whether the handler has returned.
func (t *task) finished() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// taskKey carries, in a task's handler context, the task.
type taskKey struct{}

// taskStarted tells the task whose call this is (if it is one) which run
// it started: the task takes its execution id. Only the first run counts.
func (s *Server) taskStarted(ctx context.Context, r *service.Run) {
	t, ok := ctx.Value(taskKey{}).(*task)
	if !ok || r == nil {
		return
	}
	t.startOnce.Do(func() {
		t.exec = r.Exec
		close(t.started)
	})
}

// addTasks sets up the task door: it offers tasks to the Streamable HTTP
// sessions whose client declares them, shows those sessions the tools'
// taskSupport, and ends a session's tasks with it.
func (s *Server) addTasks(hooks *server.Hooks) {
	s.tasks = &tasks{s: s, capable: map[string]bool{}, bySession: map[string][]*task{}}
	hooks.AddAfterInitialize(s.tasks.offer)
	hooks.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) {
		s.tasks.endSession(sess.SessionID())
	})
	server.WithToolFilter(s.tasks.listTools)(s.mcp)
}

// offer answers an initialize: a Streamable HTTP session whose client
// declared tasks is offered tasks/list, tasks/cancel and task-augmented
// tools/call; any other (stdio, the SSE transport, a client that did not
// declare them) is not.
func (ts *tasks) offer(ctx context.Context, _ any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil || req == nil || res == nil || req.Params.Capabilities.Tasks == nil || !ts.s.ids.streamable(sess.SessionID()) {
		return
	}
	ts.mu.Lock()
	ts.capable[sess.SessionID()] = true
	ts.mu.Unlock()
	c := &mcp.TasksCapability{List: &struct{}{}, Cancel: &struct{}{}, Requests: &mcp.TaskRequestsCapability{}}
	c.Requests.Tools = &struct {
		Call *struct{} `json:"call,omitempty"`
	}{Call: &struct{}{}}
	res.Capabilities.Tasks = c
}

// listTools marks execute_code and run_python as optionally tasks, for
// the sessions that were offered tasks.
func (ts *tasks) listTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil || !ts.isCapable(sess.SessionID()) {
		return tools
	}
	for i := range tools {
		if taskTools[tools[i].Name] {
			tools[i].Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
		}
	}
	return tools
}

func (ts *tasks) isCapable(sid string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.capable[sid]
}

// endSession cancels a session's running tasks and forgets all of them.
func (ts *tasks) endSession(sid string) {
	ts.mu.Lock()
	list := ts.bySession[sid]
	delete(ts.bySession, sid)
	delete(ts.capable, sid)
	for _, t := range list {
		ts.releaseLocked(t)
	}
	ts.mu.Unlock()
	for _, t := range list {
		t.cancel()
	}
}

// taskMessage is the part of a JSON-RPC request the task door reads.
type taskMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// mayConcernTasks reports whether body could be a task message: a
// tasks/* method or a "task" field, or something spelt with \u escapes.
// Anything else (the hot path) skips the parse; an escaped spelling this
// misses reaches mcp-go, which offers no tasks and so answers it
// synchronously or refuses it.
func mayConcernTasks(body []byte) bool {
	return bytes.Contains(body, []byte("task")) || bytes.Contains(body, []byte(`\u`))
}

// serve answers a task message of session sid (already checked to be the
// request's principal's) and reports whether it did; everything else is
// left to next, the Streamable HTTP server.
func (ts *tasks) serve(w http.ResponseWriter, r *http.Request, next http.Handler, sid string, body []byte) bool {
	if !mayConcernTasks(body) || !ts.isCapable(sid) {
		return false
	}
	var msg taskMessage
	if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return false
	}
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      json.RawMessage `json:"task"`
		Meta      map[string]any  `json:"_meta"`
	}
	switch msg.Method {
	case "tools/call":
		if json.Unmarshal(msg.Params, &call) != nil || len(call.Task) == 0 || string(call.Task) == "null" {
			return false
		}
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
	default:
		return false
	}
	if r.Header.Get("MCP-Protocol-Version") >= mcp.ProtocolVersion20260728 {
		return false // 2026-07-28 has no sessions; its tasks are an extension mcp-go does not speak
	}
	// The session is mcp-go's to vouch for: pass it a ping on the same
	// session, which also counts as the session's activity (a client that
	// only polls its task must not see its session expire idle).
	if code := ts.keepAlive(r, next, sid); code != http.StatusOK {
		http.Error(w, "Invalid session ID", code)
		return true
	}
	owner := service.CallerOf(guard.Principal(r.Context()), r.RemoteAddr)
	owner.Session = sid
	switch msg.Method {
	case "tools/call":
		if !taskTools[call.Name] {
			writeRPCError(w, msg.ID, rpcMethodNotFound, fmt.Sprintf("tool %q does not support task augmentation (only execute_code and run_python do)", call.Name))
			return true
		}
		ts.create(w, r, owner, msg, call.Name, call.Arguments, call.Task)
	case "tasks/list":
		ts.list(w, owner, msg)
	default:
		ts.onTask(w, r, owner, msg)
	}
	return true
}

// keepAlive sends mcp-go a ping on session sid, as the request r (its
// host, address and headers: mcp-go checks them as it would r's), and
// returns its status.
func (ts *tasks) keepAlive(r *http.Request, next http.Handler, sid string) int {
	const ping = `{"jsonrpc":"2.0","id":"srt-task-keepalive","method":"ping"}`
	p := r.Clone(r.Context())
	p.Body, p.ContentLength = io.NopCloser(strings.NewReader(ping)), int64(len(ping))
	p.Header.Set("Content-Type", "application/json")
	p.Header.Set("Mcp-Session-Id", sid)
	rec := &statusRecorder{header: http.Header{}}
	next.ServeHTTP(rec, p)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return rec.code
}

// statusRecorder is a ResponseWriter that keeps only the status.
type statusRecorder struct {
	header http.Header
	code   int
}

func (w *statusRecorder) Header() http.Header { return w.header }
func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *statusRecorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}

// create runs a task-augmented tools/call: the synchronous call in the
// background, answered with the task once the call has started its run.
func (ts *tasks) create(w http.ResponseWriter, r *http.Request, owner service.Caller, msg taskMessage, tool string, args, taskParams json.RawMessage) {
	var tp struct {
		TTL *int64 `json:"ttl"`
	}
	_ = json.Unmarshal(taskParams, &tp)
	ttl := defaultTaskTTL
	if tp.TTL != nil {
		ttl = min(max(time.Duration(*tp.TTL)*time.Millisecond, minTaskTTL), maxTaskTTL)
	}
	var a struct {
		Interactive bool `json:"interactive"`
	}
	_ = json.Unmarshal(args, &a)
	inner, err := syncCall(msg.Params)
	if err != nil {
		writeRPCError(w, msg.ID, rpcInvalidParams, err.Error())
		return
	}
	now := time.Now()
	t := &task{session: owner.Session, principal: owner.Principal, tool: tool, interactive: tool == "execute_code" && a.Interactive,
		created: now, updated: now, ttl: ttl, started: make(chan struct{}), done: make(chan struct{})}
	// The run outlives this request (that is the point), but keeps its
	// values (the guard's principal); it ends by tasks/cancel, with its
	// session, or by itself.
	ctx := context.WithValue(context.WithoutCancel(r.Context()), callerKey{}, owner)
	t.ctx, t.cancel = context.WithCancel(context.WithValue(ctx, taskKey{}, t))
	go ts.run(t, inner)

	select {
	case <-t.started:
	case <-t.done:
		select {
		case <-t.started:
		default:
			// No run was started: the call's own reply says why.
			writeRPCReply(w, msg.ID, t.reply)
			return
		}
	case <-r.Context().Done():
		t.cancel() // the client left before it learnt the task's id
		return
	}
	if !ts.add(t) {
		t.cancel()
		writeRPCError(w, msg.ID, rpcInternalError, "the MCP session ended")
		return
	}
	res := map[string]any{
		"task": ts.snapshot(t),
		"_meta": map[string]any{"io.modelcontextprotocol/model-immediate-response": fmt.Sprintf(
			"%s is running as task %s (its execution_id): tasks/get polls it, tasks/result waits for its result.", tool, t.id())},
	}
	writeRPCResult(w, msg.ID, res)
}

// syncCall is params as a synchronous tools/call request: without "task"
// and without a progress token (the task's client polls; there is no
// request stream to carry progress), with an id nobody else uses.
func syncCall(params json.RawMessage) ([]byte, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, errors.New("params must be an object")
	}
	// The name mcp-go runs is the one the door checked: Go's decoder
	// matches keys without regard to case, the last one winning, so
	// {"name": ..., "NAME": ...} must not leave two for mcp-go to choose
	// from.
	var named struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(params, &named); err != nil {
		return nil, errors.New("params must be an object")
	}
	for k := range p {
		if strings.EqualFold(k, "name") || strings.EqualFold(k, "task") {
			delete(p, k)
		}
	}
	p["name"], _ = json.Marshal(named.Name)
	if raw, ok := p["_meta"]; ok {
		var meta map[string]json.RawMessage
		if json.Unmarshal(raw, &meta) == nil {
			delete(meta, "progressToken")
			p["_meta"], _ = json.Marshal(meta)
		}
	}
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "srt-task-" + uuid.NewString(), "method": "tools/call", "params": p})
}

// run runs the task's synchronous call to its end and keeps its reply.
func (ts *tasks) run(t *task, inner []byte) {
	defer t.cancel()
	var reply rpcReply
	resp := ts.s.mcp.HandleMessage(t.ctx, inner)
	if b, err := json.Marshal(resp); err != nil || json.Unmarshal(b, &reply) != nil || (reply.Result == nil && reply.Error == nil) {
		reply = rpcReply{Error: rpcErrorObject(rpcInternalError, "the tool call gave no reply")}
	}
	var res struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(reply.Result, &res)
	// Done under the task's lock, with the reply: a tasks/cancel either
	// comes before (and the run ends cancelled) or sees the task finished.
	t.mu.Lock()
	t.reply, t.isError, t.updated = reply, res.IsError, time.Now()
	close(t.done)
	t.mu.Unlock()
	ts.mu.Lock()
	if slices.Contains(ts.bySession[t.session], t) {
		ts.holdLocked(t)
	}
	ts.mu.Unlock()
}

// holdLocked counts a finished task's reply in the bounds, forgetting the
// tasks that finished first while its principal, or everyone, holds too
// much; called with ts.mu held.
func (ts *tasks) holdLocked(t *task) {
	if t.heldBytes > 0 || !t.finished() {
		return
	}
	t.mu.Lock()
	size := len(t.reply.Result) + len(t.reply.Error) + 1
	t.mu.Unlock()
	t.heldBytes = size
	if ts.heldBy == nil {
		ts.heldBy = map[string]int{}
	}
	ts.heldBy[t.principal] += t.heldBytes
	ts.held += t.heldBytes
	for ts.heldBy[t.principal] > maxHeldPerPrincipal || ts.held > maxHeldReplies {
		principal := t.principal
		if ts.heldBy[principal] <= maxHeldPerPrincipal {
			principal = "" // everyone's bound: the oldest of anyone's
		}
		if !ts.forgetOldestLocked(principal) {
			return
		}
	}
}

// forgetOldestLocked drops the finished task (of principal, or of anyone
// for "") that finished first; false when there is none.
func (ts *tasks) forgetOldestLocked(principal string) bool {
	var oldest *task
	var at time.Time
	for _, list := range ts.bySession {
		for _, t := range list {
			if t.heldBytes == 0 || (principal != "" && t.principal != principal) {
				continue
			}
			if end := t.finishedAt(); oldest == nil || end.Before(at) {
				oldest, at = t, end
			}
		}
	}
	if oldest == nil {
		return false
	}
	list := ts.bySession[oldest.session]
	if i := slices.Index(list, oldest); i >= 0 {
		ts.bySession[oldest.session] = slices.Delete(list, i, i+1)
	}
	ts.releaseLocked(oldest)
	return true
}

// releaseLocked stops counting a task's reply; called with ts.mu held.
func (ts *tasks) releaseLocked(t *task) {
	if t.heldBytes == 0 {
		return
	}
	ts.heldBy[t.principal] -= t.heldBytes
	if ts.heldBy[t.principal] <= 0 {
		delete(ts.heldBy, t.principal)
	}
	ts.held -= t.heldBytes
	t.heldBytes = 0
}

// add records a started task in its session (false: the session ended),
// dropping what has expired and the oldest finished tasks past
// maxFinishedTasks.
func (ts *tasks) add(t *task) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.capable[t.session] {
		return false
	}
	ts.bySession[t.session] = append(ts.sweepLocked(t.session), t)
	ts.holdLocked(t)
	return true
}

// sweepLocked drops session sid's expired finished tasks and the oldest
// finished ones past maxFinishedTasks; called with ts.mu held.
func (ts *tasks) sweepLocked(sid string) []*task {
	list := ts.bySession[sid]
	finished := 0
	for _, t := range list {
		if t.finished() {
			finished++
		}
	}
	kept := list[:0]
	for _, t := range list {
		// The ttl counts from the end of the run: a run longer than its
		// ttl keeps its result for the client to read.
		if t.finished() && (time.Since(t.finishedAt()) > t.ttl || finished > maxFinishedTasks) {
			finished--
			ts.releaseLocked(t)
			continue
		}
		kept = append(kept, t)
	}
	clear(list[len(kept):])
	ts.bySession[sid] = kept
	return kept
}

// lookup finds task id for owner: in its own session's tasks only, and
// made by the same principal.
func (ts *tasks) lookup(owner service.Caller, id string) *task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.sweepLocked(owner.Session) {
		if t.id() == id && t.principal == owner.Principal {
			return t
		}
	}
	return nil
}

// snapshot is the task as the protocol shows it.
func (ts *tasks) snapshot(t *task) mcp.Task {
	t.mu.Lock()
	defer t.mu.Unlock()
	status, message := t.statusLocked()
	ttl, poll := t.ttl.Milliseconds(), taskPollInterval.Milliseconds()
	return mcp.Task{TaskId: t.id(), Status: status, StatusMessage: message,
		CreatedAt: t.created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		TTL: &ttl, PollInterval: &poll}
}

// statusLocked maps the call and its run onto a task status; called with
// t.mu held.
func (t *task) statusLocked() (mcp.TaskStatus, string) {
	if t.cancelled {
		return mcp.TaskStatusCancelled, "cancelled by tasks/cancel"
	}
	if !t.finished() {
		if t.interactive {
			return mcp.TaskStatusWorking, "running on a pseudo-terminal: answer its prompts with send_stdin (execution_id " + t.id() + ")"
		}
		return mcp.TaskStatusWorking, "running"
	}
	if t.reply.Error != nil {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(t.reply.Error, &e)
		return mcp.TaskStatusFailed, e.Message
	}
	sn := t.exec.Snapshot(^uint64(0) >> 1)
	switch sn.State.Status() {
	case "timed_out":
		return mcp.TaskStatusFailed, "timed out"
	case "cancelled":
		return mcp.TaskStatusCancelled, "the execution was cancelled"
	case "failed":
		msg := "the sandbox failed"
		if sn.End != nil && sn.End.Message != "" {
			msg += ": " + sn.End.ErrCode + ": " + sn.End.Message
		}
		return mcp.TaskStatusFailed, msg
	}
	if t.isError {
		return mcp.TaskStatusFailed, "the tool reported an error (tasks/result has it)"
	}
	msg := "completed"
	if code := service.ExitCode(sn.End); code != nil {
		msg = fmt.Sprintf("exited with code %d", *code)
	}
	return mcp.TaskStatusCompleted, msg
}

// onTask answers tasks/get, tasks/result and tasks/cancel.
func (ts *tasks) onTask(w http.ResponseWriter, r *http.Request, owner service.Caller, msg taskMessage) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || p.TaskID == "" {
		writeRPCError(w, msg.ID, rpcInvalidParams, "taskId is required")
		return
	}
	t := ts.lookup(owner, p.TaskID)
	if t == nil {
		writeRPCError(w, msg.ID, rpcInvalidParams, "Failed to retrieve task: Task not found")
		return
	}
	switch msg.Method {
	case "tasks/get":
		writeRPCResult(w, msg.ID, ts.snapshot(t))
	case "tasks/cancel":
		t.mu.Lock()
		status, _ := t.statusLocked()
		if status.IsTerminal() {
			t.mu.Unlock()
			writeRPCError(w, msg.ID, rpcInvalidParams, fmt.Sprintf("task %s is already %s", p.TaskID, status))
			return
		}
		t.cancelled, t.updated = true, time.Now()
		t.mu.Unlock()
		// The handler, like a synchronous call whose client went away,
		// stops its run the gentle way (an interrupt or SIGTERM, then a
		// kill) and still returns the reply tasks/result gives.
		t.cancel()
		writeRPCResult(w, msg.ID, ts.snapshot(t))
	case "tasks/result":
		select {
		case <-t.done:
		case <-r.Context().Done():
			return
		}
		t.mu.Lock()
		reply := t.reply
		t.mu.Unlock()
		if reply.Result != nil {
			reply.Result = withRelatedTask(reply.Result, t.id())
		}
		writeRPCReply(w, msg.ID, reply)
	}
}

// withRelatedTask adds the related-task key to a result's _meta (the
// spec asks for it on tasks/result, whose result names no task).
func withRelatedTask(result json.RawMessage, id string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil {
		return result
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[mcp.RelatedTaskMetaKey], _ = json.Marshal(mcp.RelatedTaskMeta(id))
	m["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(m)
	if err != nil {
		return result
	}
	return out
}

// list answers tasks/list: the session's own tasks, oldest first; the
// cursor is the last task id of the page before.
func (ts *tasks) list(w http.ResponseWriter, owner service.Caller, msg taskMessage) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	ts.mu.Lock()
	var mine []*task
	for _, t := range ts.sweepLocked(owner.Session) {
		if t.principal == owner.Principal {
			mine = append(mine, t)
		}
	}
	ts.mu.Unlock()
	start := 0
	if p.Cursor != "" {
		start = -1
		for i, t := range mine {
			if t.id() == p.Cursor {
				start = i + 1
			}
		}
		if start < 0 {
			writeRPCError(w, msg.ID, rpcInvalidParams, "invalid cursor")
			return
		}
	}
	page := mine[start:]
	res := map[string]any{}
	if len(page) > taskPageSize {
		page = page[:taskPageSize]
		res["nextCursor"] = page[len(page)-1].id()
	}
	list := []mcp.Task{}
	for _, t := range page {
		list = append(list, ts.snapshot(t))
	}
	res["tasks"] = list
	writeRPCResult(w, msg.ID, res)
}

// streamable reports whether id is a live Streamable HTTP session (not an
// SSE stream's, not stdio's).
func (m *mcpSessionIDs) streamable(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.live[id]
	return o != nil && !o.sse
}
