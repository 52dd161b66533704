package mcpserver

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// listing is what tools/list carries for the offered tools.
func listing(t *testing.T, s *Server) []byte {
	t.Helper()
	var tools []mcp.Tool
	for _, sp := range catalogue {
		if s.tools[sp.name] {
			tools = append(tools, s.tool(sp.name, ""))
		}
	}
	b, err := json.Marshal(map[string]any{"tools": linkRunApp(context.Background(), tools)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func catalogueServer(t *testing.T, profile ...string) *Server {
	t.Helper()
	on, err := ParseTools(profile)
	if err != nil {
		t.Fatal(err)
	}
	return &Server{cfg: Config{ReplyChars: DefaultReplyChars}, tools: on}
}

// TestCatalogueBudget holds the listing to what hosts that send every
// tool with every model request can afford: the whole catalogue 12 KB,
// execute_code 2 KB, with the run view's links (the tasks' taskSupport is
// shown only to clients that declare tasks).
func TestCatalogueBudget(t *testing.T) {
	s := catalogueServer(t)
	if n := len(listing(t, s)); n > 12<<10 {
		t.Errorf("the full catalogue is %d bytes; the budget is %d", n, 12<<10)
	}
	b, _ := json.Marshal(linkRunApp(context.Background(), []mcp.Tool{s.tool("execute_code", "")})[0])
	if len(b) > 2<<10 {
		t.Errorf("execute_code is %d bytes; the budget is %d", len(b), 2<<10)
	}
	for _, sp := range catalogue {
		tl := s.tool(sp.name, "")
		var schema map[string]any
		if err := json.Unmarshal(tl.RawInputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: input schema is not an object schema: %v %s", sp.name, err, tl.RawInputSchema)
		}
		if tl.RawOutputSchema != nil && !json.Valid(tl.RawOutputSchema) {
			t.Errorf("%s: output schema is not JSON", sp.name)
		}
		if sp.title == "" || sp.desc == "" {
			t.Errorf("%s: no title or description", sp.name)
		}
	}
}

// TestToolNamesModelAPIsAccept: OpenAI's API refuses a function whose
// name does not match this (the OpenAI Agents SDK passes MCP names
// through unchanged), and so do other hosts.
func TestToolNamesModelAPIsAccept(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, sp := range catalogue {
		if !valid.MatchString(sp.name) {
			t.Errorf("tool %q does not match %s", sp.name, valid)
		}
	}
	for dotted, name := range dottedNames {
		if specOf(name) == nil {
			t.Errorf("%s answers as %s, which is not in the catalogue", dotted, name)
		}
	}
}

func TestParseTools(t *testing.T) {
	all, _ := ParseTools(nil)
	if len(all) != len(catalogue) {
		t.Errorf("default offers %d tools, the catalogue has %d", len(all), len(catalogue))
	}
	exec, _ := ParseTools([]string{"exec"})
	if !exec["execute_code"] || !exec["get_execution_output"] || exec["run_python"] || len(exec) != 7 {
		t.Errorf("exec profile: %v", exec)
	}
	mix, err := ParseTools([]string{"runcode", "execute_code", " sandbox.list_runners"})
	if err != nil || len(mix) != 3 || !mix["sandbox_list_runners"] {
		t.Errorf("a group and single tools: %v %v", mix, err)
	}
	if _, err := ParseTools([]string{"exec", "execute-code"}); err == nil || !strings.Contains(err.Error(), `no profile or tool "execute-code"`) || !strings.Contains(err.Error(), "execute_code") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := ParseTools([]string{" "}); err == nil {
		t.Error("an empty list was accepted")
	}
	for name := range profiles {
		s := catalogueServer(t, name)
		if n := len(listing(t, s)); n > 12<<10 {
			t.Errorf("profile %s: %d bytes", name, n)
		}
	}
}

// TestHostHintCoversTheBound: a tool's anthropic/maxResultSizeChars is
// what its reply may take (output at most twice the bound once JSON
// escapes it, and the other fields) for every --max-reply-chars the
// command accepts (1000 to 1,000,000); past 246,000 the hint is capped
// at 500,000 while the reply is not, so a host keeps inline less than
// the server says it will send.
func TestHostHintCoversTheBound(t *testing.T) {
	for _, n := range []int{1000, DefaultReplyChars, MaxReplyChars} {
		s := &Server{cfg: Config{ReplyChars: n}}
		if h := s.hostResultChars(); h < 2*n+8000 {
			t.Errorf("--max-reply-chars %d: hint %d, a reply may take %d", n, h, 2*n+8000)
		}
	}
}
