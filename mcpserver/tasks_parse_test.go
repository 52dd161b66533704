package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The task door decides a tools/call is a task of execute_code or
// run_python from its own parse of params (encoding/json: keys match
// case-insensitively, the last one wins), then hands mcp-go syncCall's
// re-encoding of params (a map: keys sorted, "NAME" before "name"), which
// mcp-go parses again. With both "name" and "NAME" the two parses name
// different tools: the door's taskTools check is not about the tool that
// runs. Today the tool that runs is still one the profile offers, and one
// that starts no run is answered synchronously, so this is no escalation;
// but every check the door makes on the name (and on "interactive") is
// about a message mcp-go does not run.
//
// Fails today: the door sees execute_code, mcp-go runs install_package.
func TestTaskDoorSeesTheToolMcpGoRuns(t *testing.T) {
	params := json.RawMessage(`{"name":"install_package","NAME":"execute_code","arguments":{"packages":["x"]},"task":{}}`)
	var door struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(params, &door); err != nil {
		t.Fatal(err)
	}
	inner, err := syncCall(params)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Params json.RawMessage `json:"params"`
	}
	var req mcp.CallToolRequest
	if err := json.Unmarshal(inner, &msg); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msg.Params, &req.Params); err != nil {
		t.Fatal(err)
	}
	if taskTools[door.Name] && door.Name != req.Params.Name {
		t.Fatalf("the door admitted a task of %q; mcp-go runs %q (inner message %s)", door.Name, req.Params.Name, inner)
	}
}
