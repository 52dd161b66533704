package integration

// Hostile callers of MCP tasks: a task belongs to the MCP session that
// made it, as its execution does. Another session of the same key, another
// key, another key presenting the owner's Mcp-Session-Id, and a
// sessionless caller with the owner's key each try tasks/get, tasks/result,
// tasks/cancel and tasks/list on it (and the execution tools on its id),
// and learn nothing; a key's running tasks stop at its share of the
// server's executions, like its executions.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestHostileTasks(t *testing.T) {
	parallel(t)
	// Two keys share --max-concurrent 4: each may run 2 at once.
	s := startTenants(t, "--max-concurrent", "4")
	alice := sessionClient(t, s.url, aliceToken, true)
	aliceAgain := sessionClient(t, s.url, aliceToken, true)
	bob := sessionClient(t, s.url, bobToken, true)

	marker := fmt.Sprintf("srtmcp-hostile-task-%d", time.Now().UnixNano())
	task := startTask(t, alice, "execute_code", map[string]any{"command": "sh -c 'sleep 300; :' " + marker, "timeout_seconds": 280})
	waitProcesses(t, marker, 30*time.Second)
	id := task.TaskId

	for name, other := range map[string]*client.Client{"alice's other session": aliceAgain, "bob": bob} {
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			res, rpcErr := rpc(t, other, method, map[string]any{"taskId": id})
			if rpcErr == nil || rpcErr.Code != -32602 || strings.Contains(rpcErr.Message, marker) {
				t.Fatalf("%s: %s of another session's task: want -32602 not found, got %s %+v", name, method, res, rpcErr)
			}
		}
		list, err := other.ListTasks(context.Background(), mcp.ListTasksRequest{})
		if err != nil {
			t.Fatalf("%s: tasks/list: %v", name, err)
		}
		for _, tk := range list.Tasks {
			if tk.TaskId == id {
				t.Fatalf("%s: tasks/list shows another session's task %s", name, id)
			}
		}
		if v, isErr := callTool(t, other, "get_execution_status", map[string]any{"execution_id": id}); !isErr || strings.Contains(mustJSON(v), marker) {
			t.Fatalf("%s: get_execution_status of another session's task id: %v", name, v)
		}
	}

	// Bob presenting alice's session id is told it does not exist; a
	// sessionless caller with alice's key is offered no tasks.
	getBody := `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + id + `"}}`
	if code, _, body := rawMCP(t, s.url, bobToken, alice.GetSessionId(), getBody); code != 404 || strings.Contains(body, "working") {
		t.Fatalf("bob with alice's Mcp-Session-Id: want 404, got %d %s", code, body)
	}
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel", "tasks/list"} {
		body := `{"jsonrpc":"2.0","id":8,"method":"` + method + `","params":{"taskId":"` + id + `"}}`
		if code, _, got := rawMCP(t, s.url, aliceToken, "", body); !strings.Contains(got, `"error"`) || strings.Contains(got, `"working"`) || strings.Contains(got, marker) {
			t.Fatalf("sessionless %s with alice's key: want an error, got %d %s", method, code, got)
		}
	}

	// Untouched: still alice's and running.
	got, err := alice.GetTask(context.Background(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	if err != nil || got.Status != mcp.TaskStatusWorking {
		t.Fatalf("alice's task after the attempts: %+v %v", got, err)
	}

	// Bounded like executions: alice has 1 running; a second starts, a
	// third is refused (and is no task); bob still has his share.
	second := startTask(t, alice, "execute_code", map[string]any{"command": "sleep 60", "timeout_seconds": 50})
	refused := callAsTask(t, alice, "execute_code", map[string]any{"command": "echo one-too-many"})
	if _, ok := refused["task"]; ok || string(refused["isError"]) != "true" || !strings.Contains(string(refused["structuredContent"]), "too_many_executions") {
		t.Fatalf("alice's third running task: want the too_many_executions reply, got %s", mustJSON(refused))
	}
	bobs := startTask(t, bob, "execute_code", map[string]any{"command": "echo bobs-own"})
	if end := waitTask(t, bob, bobs.TaskId); end.Status != mcp.TaskStatusCompleted {
		t.Fatalf("bob's task while alice is at her share: %+v", end.Task)
	}

	for _, tk := range []string{id, second.TaskId} {
		if res, err := alice.CancelTask(context.Background(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: tk}}); err != nil || res.Status != mcp.TaskStatusCancelled {
			t.Fatalf("alice cancels her task %s: %+v %v", tk, res, err)
		}
	}
	waitNoProcesses(t, marker, 15*time.Second)
}
