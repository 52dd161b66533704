package integration

// Issue 28 with the clients it names: OpenAI's function-name rule
// (^[a-zA-Z0-9_-]{1,64}$) for every profile's listing, the real OpenAI
// Agents SDK from npm driving srt-mcp with a scripted Responses API that
// refuses names as OpenAI does, tools outside a profile refused, and
// replies bounded by --max-reply-chars with the rest readable by paging
// get_execution_output from next_seq.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// openAIName is OpenAI's rule for a function name; the Python Agents SDK
// passes MCP names through unchanged, so a listed name outside it is an
// HTTP 400 on the agent's first request.
var openAIName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// listedNames is the tools/list of a server as mcp-go's client reads it.
func listedNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// callRaw is a tools/call that keeps a JSON-RPC error as a value.
func callRaw(c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return c.CallTool(ctx, req)
}

func TestToolNamesEveryProfile(t *testing.T) {
	parallel(t)
	lists := map[string][]string{}
	for _, profile := range []string{"", "all", "exec", "data", "workspace", "runcode", "run_python,sandbox_list_runners"} {
		args := []string{"--backend", "native"}
		if profile != "" {
			args = append(args, "--tools", profile)
		}
		s := startServe(t, args...)
		c := connect(t, s.url)
		names := listedNames(t, c)
		lists[profile] = names
		if len(names) == 0 {
			t.Fatalf("--tools %q lists no tool", profile)
		}
		for _, n := range names {
			if !openAIName.MatchString(n) {
				t.Errorf("--tools %q lists %q, which OpenAI's API refuses", profile, n)
			}
		}
		if slices.Contains(names, "sandbox.run_code") || slices.Contains(names, "sandbox.list_runners") {
			t.Errorf("--tools %q lists a dotted name: %v", profile, names)
		}
		if !slices.Contains(names, "sandbox_run_code") {
			continue
		}
		// The dotted name is not listed yet still answers (seed 003's
		// plain JSON-RPC callers).
		res, err := callRaw(c, "sandbox.run_code", map[string]any{"conversationId": "dotted-1", "language": "python", "code": "print(6 * 7)"})
		if err != nil || res.IsError {
			t.Fatalf("--tools %q: sandbox.run_code: %v %+v", profile, err, res)
		}
		var v struct {
			Success bool
			Output  string
		}
		b, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(b, &v) != nil || !v.Success || v.Output != "42\n" {
			t.Errorf("--tools %q: sandbox.run_code answered %s", profile, b)
		}
	}
	// The default is every tool, and the profiles split it between them.
	if !reflect.DeepEqual(lists[""], lists["all"]) {
		t.Errorf("the default lists %v, all lists %v", lists[""], lists["all"])
	}
	var union []string
	for _, p := range []string{"exec", "data", "workspace", "runcode"} {
		if len(lists[p]) >= len(lists["all"]) {
			t.Errorf("--tools %s lists as many tools as all: %v", p, lists[p])
		}
		union = append(union, lists[p]...)
	}
	slices.Sort(union)
	if !reflect.DeepEqual(slices.Compact(union), lists["all"]) {
		t.Errorf("the profiles together list %v, all lists %v", union, lists["all"])
	}
	if want := []string{"run_python", "sandbox_list_runners"}; !reflect.DeepEqual(lists["run_python,sandbox_list_runners"], want) {
		t.Errorf("--tools run_python,sandbox_list_runners lists %v", lists["run_python,sandbox_list_runners"])
	}
}

// A tool outside the operator's profile is refused when called by name,
// dotted or not, and the refusal names it.
func TestToolOutsideProfileRefused(t *testing.T) {
	parallel(t)
	s := startServe(t, "--backend", "native", "--tools", "exec")
	c := connect(t, s.url)
	if names := listedNames(t, c); slices.Contains(names, "run_python") || !slices.Contains(names, "execute_code") {
		t.Fatalf("--tools exec lists %v", names)
	}
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"run_python", map[string]any{"code": "print(1)"}},
		{"sandbox_run_code", map[string]any{"conversationId": "c", "language": "python", "code": "print(1)"}},
		{"sandbox.run_code", map[string]any{"conversationId": "c", "language": "python", "code": "print(1)"}},
	} {
		res, err := callRaw(c, tc.name, tc.args)
		var said string
		switch {
		case err != nil:
			said = err.Error()
		case res.IsError:
			for _, ct := range res.Content {
				if tx, ok := ct.(mcp.TextContent); ok {
					said += tx.Text
				}
			}
		default:
			t.Errorf("--tools exec ran %s: %+v", tc.name, res.StructuredContent)
			continue
		}
		// The refusal names the tool (a dotted call may be named by its
		// listed spelling).
		if !strings.Contains(said, tc.name) && !strings.Contains(said, strings.ReplaceAll(tc.name, ".", "_")) {
			t.Errorf("--tools exec refused %s without naming it: %s", tc.name, said)
		}
		t.Logf("%s refused: %s", tc.name, said)
	}
	// The profile's own tools still run.
	if v, isErr := callTool(t, c, "execute_code", map[string]any{"command": "echo in-profile"}); isErr || !strings.Contains(fmt.Sprint(v["output"]), "in-profile") {
		t.Errorf("execute_code under --tools exec: %v", v)
	}
}

// The OpenAI Agents SDK (npm @openai/agents) runs an agent on srt-mcp's
// tools, with the default profile and with --tools exec; the script's
// scripted Responses API refuses names as OpenAI does and checks what the
// model received.
func TestOpenAIAgentsSDK(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@openai", "agents")); err != nil {
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
			t.Fatal("@openai/agents is not installed in " + dir)
		}
		t.Skip("@openai/agents is not installed")
	}
	lists := map[string][]string{}
	for _, profile := range []string{"", "exec"} {
		args := []string{"--backend", "native"}
		if profile != "" {
			args = append(args, "--tools", profile)
		}
		s := startServe(t, args...)
		lists[profile] = listedNames(t, connect(t, s.url))
		cmd := exec.Command("node", "openai-agents.mjs", "--mcp", s.url, "--want-tools", strings.Join(lists[profile], ","))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+reachableTempDir(t))
		out, stderr, err := runNode(t, cmd, 3*time.Minute)
		// 2 refusal units, 2 listing checks, 4 request checks, 3 output
		// checks, 1 final answer.
		if checks := nodeChecks(t, "openai-agents "+profile, out); err != nil || checks < 12 {
			t.Fatalf("--tools %q: openai-agents.mjs: %v (%d checks)\n%s\nstderr: %s", profile, err, checks, out, stderr)
		}
	}
	// --tools exec offered the model fewer tools, none of seed 003's.
	if len(lists["exec"]) >= len(lists[""]) || slices.Contains(lists["exec"], "sandbox_run_code") {
		t.Errorf("--tools exec lists %v; the default %v", lists["exec"], lists[""])
	}
}
