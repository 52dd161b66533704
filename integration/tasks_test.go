package integration

// MCP tasks (SEP-1686, 2025-11-25) for execute_code and run_python,
// driven by mcp-go's client over Streamable HTTP against srt-mcp serve:
// the capability and the tools' taskSupport are offered to a client that
// declares tasks (and to no other), a task's id is its execution's id,
// tasks/get goes working → completed, tasks/result is the synchronous
// reply, tasks/cancel stops the sandbox, a timeout fails the task.
//
// mcp-go's client has calls for tasks/get, tasks/result, tasks/list,
// tasks/cancel and WaitForTask, but none for a task-augmented tools/call
// (CallTool wants a CallToolResult back, not a CreateTaskResult): that one
// request goes through the same client's transport, on its session.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// sessionClient is an mcp-go client on a 2025-11-25 session of url, with
// token (if any), declaring the tasks capability when declare is set.
func sessionClient(t *testing.T, url, token string, declare bool) *client.Client {
	t.Helper()
	var opts []transport.StreamableHTTPCOption
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	c, err := client.NewStreamableHttpClient(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "srt-mcp-test", Version: "1"}
	if declare {
		init.Params.Capabilities.Tasks = &mcp.TasksCapability{List: &struct{}{}, Cancel: &struct{}{}}
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var rpcIDs atomic.Int64

// rpc sends one request on c's session and returns its result or error.
func rpc(t *testing.T, c *client.Client, method string, params any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0",
		ID: mcp.NewRequestId(fmt.Sprint("tasks-test-", rpcIDs.Add(1))), Method: method, Params: params})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp.Result, resp.Error
}

// callAsTask sends a task-augmented tools/call and returns the raw result.
func callAsTask(t *testing.T, c *client.Client, tool string, args map[string]any) map[string]json.RawMessage {
	t.Helper()
	res, rpcErr := rpc(t, c, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 600000}})
	if rpcErr != nil {
		t.Fatalf("%s as a task: JSON-RPC error %d %s", tool, rpcErr.Code, rpcErr.Message)
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatalf("%s as a task: %v: %s", tool, err, res)
	}
	return v
}

// startTask sends a task-augmented tools/call and returns its task.
func startTask(t *testing.T, c *client.Client, tool string, args map[string]any) mcp.Task {
	t.Helper()
	v := callAsTask(t, c, tool, args)
	var task mcp.Task
	if err := json.Unmarshal(v["task"], &task); err != nil || task.TaskId == "" {
		t.Fatalf("%s as a task: no task in %s", tool, mustJSON(v))
	}
	if task.Status != mcp.TaskStatusWorking || task.CreatedAt == "" || task.TTL == nil || task.PollInterval == nil {
		t.Fatalf("%s: a new task is working, with createdAt, ttl and pollInterval: %+v", tool, task)
	}
	return task
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// waitTask polls the task until it ends.
func waitTask(t *testing.T, c *client.Client, id string) *mcp.GetTaskResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.WaitForTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}}, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("waiting for task %s: %v", id, err)
	}
	return res
}

// taskResult is the task's tools/call result: its structured content and
// whether it is an error.
func taskResult(t *testing.T, c *client.Client, id string) (*mcp.TaskResultResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	if err != nil {
		t.Fatalf("tasks/result %s: %v", id, err)
	}
	var v map[string]any
	_ = json.Unmarshal([]byte(mustJSON(res.StructuredContent)), &v)
	if rel, _ := res.Meta.AdditionalFields[mcp.RelatedTaskMetaKey].(map[string]any); rel["taskId"] != id {
		t.Errorf("tasks/result %s: _meta names no related task: %+v", id, res.Meta)
	}
	return res, v
}

// withoutIDsAndTimes drops what differs between two runs of the same command:
// ids and times.
func withoutIDsAndTimes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			switch k {
			case "execution_id", "ts", "duration_ms", "execution_time_ms", "run_id", "cpu_ms", "max_rss_bytes":
				continue
			}
			out[k] = withoutIDsAndTimes(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutIDsAndTimes(e)
		}
		return out
	}
	return v
}

var executionIDPattern = regexp.MustCompile(`^(exec_[A-Za-z0-9-]+_)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestMCPTasks(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	s := startServe(t)
	c := sessionClient(t, s.url, "", true)

	t.Run("offered", func(t *testing.T) {
		caps := c.GetServerCapabilities().Tasks
		if caps == nil || caps.List == nil || caps.Cancel == nil || caps.Requests == nil || caps.Requests.Tools == nil || caps.Requests.Tools.Call == nil {
			t.Fatalf("a client declaring tasks is offered tasks/list, tasks/cancel and task-augmented tools/call: %+v", caps)
		}
		tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			want := tool.Name == "execute_code" || tool.Name == "run_python"
			got := tool.Execution != nil && tool.Execution.TaskSupport == mcp.TaskSupportOptional
			if got != want {
				t.Errorf("tool %s: taskSupport optional %v, want %v (%+v)", tool.Name, got, want, tool.Execution)
			}
		}
	})

	t.Run("execute_code", func(t *testing.T) {
		args := map[string]any{"command": "sleep 1; echo hello-from-a-task; sleep 0.2; echo to-stderr >&2; exit 3"}
		task := startTask(t, c, "execute_code", args)
		if !executionIDPattern.MatchString(task.TaskId) {
			t.Errorf("task id %q does not look like an execution id", task.TaskId)
		}
		got, err := c.GetTask(context.Background(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}})
		if err != nil || got.Status != mcp.TaskStatusWorking {
			t.Fatalf("tasks/get while it sleeps: %+v %v", got, err)
		}
		// The task's id is the execution's: the execution tools know it.
		st, isErr := callTool(t, c, "get_execution_status", map[string]any{"execution_id": task.TaskId})
		if isErr || st["execution_id"] != task.TaskId {
			t.Fatalf("get_execution_status of the task's id: %v", st)
		}
		end := waitTask(t, c, task.TaskId)
		if end.Status != mcp.TaskStatusCompleted || end.LastUpdatedAt == "" {
			t.Fatalf("a command that exited: task completed, got %+v", end.Task)
		}
		res, v := taskResult(t, c, task.TaskId)
		if v["execution_id"] != task.TaskId || v["status"] != "completed" || v["exit_code"] != float64(3) || res.IsError {
			t.Fatalf("tasks/result: %s", mustJSON(res))
		}
		list, err := c.ListTasks(context.Background(), mcp.ListTasksRequest{})
		if err != nil || len(list.Tasks) == 0 || list.Tasks[len(list.Tasks)-1].TaskId != task.TaskId {
			t.Fatalf("tasks/list has the task last: %+v %v", list, err)
		}

		// The same call, synchronously: the same reply but for ids and times.
		direct, isErr := callTool(t, c, "execute_code", args)
		if isErr || direct["execution_id"] == task.TaskId {
			t.Fatalf("synchronous execute_code: %v", direct)
		}
		if a, b := withoutIDsAndTimes(v), withoutIDsAndTimes(direct); !reflect.DeepEqual(a, b) {
			t.Fatalf("tasks/result differs from the synchronous reply:\n task %s\n sync %s", mustJSON(a), mustJSON(b))
		}
		if _, rpcErr := rpc(t, c, "tasks/cancel", map[string]any{"taskId": task.TaskId}); rpcErr == nil || rpcErr.Code != -32602 {
			t.Fatalf("tasks/cancel of a completed task: want -32602, got %+v", rpcErr)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		marker := fmt.Sprintf("srtmcp-task-cancel-%d", time.Now().UnixNano())
		// sh's $0 carries the marker; "; :" keeps sh from exec'ing sleep.
		task := startTask(t, c, "execute_code", map[string]any{"command": "sh -c 'sleep 300; :' " + marker, "timeout_seconds": 280})
		waitProcesses(t, marker, 30*time.Second)
		ctx := context.Background()
		res, err := c.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}})
		if err != nil || res.Status != mcp.TaskStatusCancelled {
			t.Fatalf("tasks/cancel: %+v %v", res, err)
		}
		waitNoProcesses(t, marker, 15*time.Second)
		got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}})
		if err != nil || got.Status != mcp.TaskStatusCancelled {
			t.Fatalf("tasks/get after tasks/cancel: %+v %v", got, err)
		}
		_, v := taskResult(t, c, task.TaskId)
		if v["execution_id"] != task.TaskId || v["status"] != "cancelled" {
			t.Fatalf("tasks/result of a cancelled task is the cancelled run's reply: %v", v)
		}
		if _, rpcErr := rpc(t, c, "tasks/cancel", map[string]any{"taskId": task.TaskId}); rpcErr == nil || rpcErr.Code != -32602 {
			t.Fatalf("tasks/cancel twice: want -32602, got %+v", rpcErr)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		task := startTask(t, c, "execute_code", map[string]any{"command": "sleep 30", "timeout_seconds": 1})
		if end := waitTask(t, c, task.TaskId); end.Status != mcp.TaskStatusFailed || !strings.Contains(end.StatusMessage, "timed out") {
			t.Fatalf("a run that timed out: task failed, got %+v", end.Task)
		}
		_, v := taskResult(t, c, task.TaskId)
		if v["status"] != "timed_out" || v["exit_code"] != float64(-1) {
			t.Fatalf("tasks/result of a timeout: %v", v)
		}
	})

	t.Run("code", func(t *testing.T) {
		task := startTask(t, c, "execute_code", map[string]any{"code": "x = 6 * 7\nx", "language": "python"})
		if end := waitTask(t, c, task.TaskId); end.Status != mcp.TaskStatusCompleted {
			t.Fatalf("a cell: %+v", end.Task)
		}
		_, v := taskResult(t, c, task.TaskId)
		if v["execution_id"] != task.TaskId || !strings.Contains(fmt.Sprint(v["stdout"]), "42") {
			t.Fatalf("tasks/result of a cell: %v", v)
		}
	})

	t.Run("run_python", func(t *testing.T) {
		task := startTask(t, c, "run_python", map[string]any{"code": "import time; time.sleep(0.5); print(6 * 7)"})
		if !executionIDPattern.MatchString(task.TaskId) {
			t.Errorf("task id %q does not look like an execution id", task.TaskId)
		}
		if end := waitTask(t, c, task.TaskId); end.Status != mcp.TaskStatusCompleted {
			t.Fatalf("run_python: %+v", end.Task)
		}
		res, v := taskResult(t, c, task.TaskId)
		if v["stdout"] != "42\n" || v["exit_code"] != float64(0) || res.IsError || !strings.HasPrefix(fmt.Sprint(v["session_id"]), "sess_") {
			t.Fatalf("tasks/result of run_python: %s", mustJSON(res))
		}
	})

	t.Run("no run, no task", func(t *testing.T) {
		// A call that fails before it starts a run has no execution id to
		// be a task's: its own reply comes back.
		v := callAsTask(t, c, "execute_code", map[string]any{"command": " "})
		if _, ok := v["task"]; ok || string(v["isError"]) != "true" {
			t.Fatalf("an empty command as a task: want the synchronous error reply, got %s", mustJSON(v))
		}
		if _, rpcErr := rpc(t, c, "tools/call", map[string]any{"name": "list_executions", "arguments": map[string]any{}, "task": map[string]any{}}); rpcErr == nil || rpcErr.Code != -32601 {
			t.Fatalf("a tool without taskSupport as a task: want -32601, got %+v", rpcErr)
		}
	})
}

// TestMCPTasksNotDeclared: a client that does not declare tasks sees no
// tasks at all, and a "task" field in its tools/call is ignored.
func TestMCPTasksNotDeclared(t *testing.T) {
	parallel(t)
	s := startServe(t)
	c := sessionClient(t, s.url, "", false)
	if caps := c.GetServerCapabilities().Tasks; caps != nil {
		t.Fatalf("tasks offered to a client that did not declare them: %+v", caps)
	}
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Execution != nil {
			t.Errorf("tool %s shows execution %+v to a client without tasks", tool.Name, tool.Execution)
		}
	}
	v := callAsTask(t, c, "execute_code", map[string]any{"command": "echo plain-reply"})
	var res mcp.CallToolResult
	if _, ok := v["task"]; ok || json.Unmarshal(mustRaw(v), &res) != nil {
		t.Fatalf("want the plain reply, got %s", mustJSON(v))
	}
	var sc map[string]any
	_ = json.Unmarshal(v["structuredContent"], &sc)
	if sc["status"] != "completed" || !strings.Contains(mustJSON(sc["output"]), "plain-reply") {
		t.Fatalf("plain reply: %s", mustJSON(v))
	}
	if _, rpcErr := rpc(t, c, "tasks/list", map[string]any{}); rpcErr == nil || rpcErr.Code != -32601 {
		t.Fatalf("tasks/list without tasks: want -32601, got %+v", rpcErr)
	}
}

func mustRaw(v map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestMCPTasksTypeScriptClient: the TypeScript SDK 1.32's experimental
// task API (callToolStream, getTask, getTaskResult, listTasks,
// cancelTask) end to end; the cancelled task's sandbox is gone.
func TestMCPTasksTypeScriptClient(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	requirePythonData(t)
	s := startServe(t)
	marker := fmt.Sprintf("srtmcp-ts-task-%d", time.Now().UnixNano())
	cmd := exec.Command("node", "tasks.mjs", "--url", s.url, "--marker", marker)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if checks := nodeChecks(t, "tasks.mjs", out); err != nil || checks < 15 {
		t.Fatalf("tasks.mjs: %v (%d checks)\nstderr: %s", err, checks, stderr.String())
	}
	waitNoProcesses(t, marker, 15*time.Second)
}
