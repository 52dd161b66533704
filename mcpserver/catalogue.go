package mcpserver

// The catalogue: every tool's name, title, description, schemas and hints
// in one table, and the profiles an operator picks from (--tools).
//
// Hosts that do not defer tools send the whole tools/list with every model
// request, so its size is a cost paid on every turn: the full catalogue is
// kept under 12 KB and execute_code under 2 KB (TestCatalogueBudget).
// Property definitions shared by several tools are written once below;
// prose says what a model needs to call a tool right, and the errors say
// the rest (each names what to change).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Tool groups (--tools names a profile, a group or single tools).
const (
	groupExec      = "exec"      // seed 002: commands and their executions
	groupData      = "data"      // seed 000: data sessions and their files
	groupWorkspace = "workspace" // seed 001: interpreters, workspaces, snapshots
	groupRunCode   = "runcode"   // seed 003: a conversation's code runner
)

// DefaultReplyChars is the output one reply carries by default: under
// the 50,000 characters past which Claude Code moves a result to a file,
// with room for the reply's other fields.
const DefaultReplyChars = 40_000

// MaxReplyChars is the largest bound --max-reply-chars takes: a reply
// carries its output twice (structured and as text), and Claude Code keeps
// at most 500,000 characters inline whatever a tool declares.
const MaxReplyChars = (500_000 - 8000) / 2

// profiles name the tool sets --tools accepts besides single tool names.
var profiles = map[string][]string{
	"all":          {groupExec, groupData, groupWorkspace, groupRunCode},
	groupExec:      {groupExec},
	groupData:      {groupData},
	groupWorkspace: {groupWorkspace},
	groupRunCode:   {groupRunCode},
}

// Property definitions several tools share.
const (
	propExecID      = `"execution_id":{"type":"string"}`
	propSession     = `"session_id":{"type":"string","description":"sess_… from a reply; omit: this connection's workspace."}`
	propSessionReq  = `"session_id":{"type":"string"}`
	propSessionNew  = `"session_id":{"type":"string","description":"sess_… from a reply; omit to start a session (the reply names it)."}`
	propInterpreter = `"language":{"type":"string","enum":["python","javascript"],"default":"python"}`
	propSnapshot    = `"snapshot_id":{"type":"string"}`
	noArgs          = `{"type":"object","properties":{}}`
)

// object is an input schema of the given properties. It does not say
// additionalProperties false: the server refuses an unknown argument
// itself, naming the closest one (strict.go).
func object(required []string, props ...string) string {
	req := ""
	if len(required) > 0 {
		b, _ := json.Marshal(required)
		req = `,"required":` + string(b)
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}` + req + `}`
}

// resultOutput is the output schema of the tools that answer with an
// execution's output.
const resultOutput = `{"type":"object","properties":{"execution_id":{"type":"string"},"status":{"type":"string"},"exit_code":{"type":["integer","null"]},"output":{"type":"array"},"next_seq":{"type":"integer"}},"required":["execution_id","status","output"]}`

// sandboxConfigProp is described rather than spelled out as a nested
// schema: the server checks every key and names a wrong one.
const sandboxConfigProp = `"sandbox_config":{"type":"object","description":"Only what the run needs, within the operator's ceiling: {network:{allowed_domains:[\"pypi.org\"], denied_domains, request_rules:[{host,methods,paths}], require_host_match}, filesystem:{allow_read, allow_write, deny_read, deny_write}, credentials:[names]}"}`

// execProps are execute_code's arguments (seeds 001 and 002).
var execProps = []string{
	`"command":{"type":"string","description":"bash -c command; or give code and language."}`,
	`"code":{"type":"string","description":"Runs in the workspace's interpreter (python and javascript keep variables; figures go to /mnt/data)."}`,
	`"language":{"type":"string","description":"python, javascript, typescript, bash, c, cpp, go, java, rust, php, r, fortran, d"}`,
	`"timeout_seconds":{"type":"number","default":60}`,
	`"timeout":{"type":"integer","default":30,"description":"With code: seconds per cell."}`,
	`"interactive":{"type":"boolean","description":"On a terminal; answer with send_stdin."}`,
	`"working_directory":{"type":"string","default":"/tmp"}`,
	`"session_id":{"type":"string","description":"sess_… from a reply: its files are at /mnt/data. With code: omit for this connection's; \"__stateless__\": a fresh one."}`,
	`"environment":{"type":"object","additionalProperties":{"type":"string"}}`,
	sandboxConfigProp,
}

// toolSpec is one tool as it is listed.
type toolSpec struct {
	name, group, title, desc string
	input, output            string
	readOnly, idempotent     bool
	destructive              bool // meaningful when not readOnly
	// resultChars: the tool answers with a run's output, so its reply is
	// sized by --max-reply-chars and says so to hosts that read the hint.
	resultChars bool
}

// catalogue lists every tool in the order tools/list shows them.
var catalogue = []toolSpec{
	{name: "execute_code", group: groupExec, title: "Run code", resultChars: true, destructive: true,
		desc: "Run a shell command in a fresh OS sandbox, or code in a workspace's interpreter, and wait. " +
			"Output past %d characters is cut: read on with get_execution_output since_seq=next_seq. " +
			"No network or host paths unless sandbox_config asks.",
		input:  object(nil, append(slices.Clone(execProps), `"wait_for_completion":{"type":"boolean","default":true}`)...),
		output: resultOutput},
	{name: "execute_code_async", group: groupExec, title: "Start code", destructive: true,
		desc:  "execute_code, but returns {execution_id, status:\"running\"} at once; then get_execution_output, send_stdin, cancel_execution.",
		input: object(nil, undescribed(execProps)...)},
	{name: "get_execution_output", group: groupExec, title: "Execution output", readOnly: true, idempotent: true, resultChars: true,
		desc: "An execution's status and output events after since_seq (the last reply's next_seq). " +
			"wait=true blocks until it ends (wait_for=\"output\": until new output).",
		input: object([]string{"execution_id"}, propExecID, `"since_seq":{"type":"integer"}`, `"wait":{"type":"boolean"}`,
			`"wait_for":{"type":"string","enum":["completion","output"]}`, `"wait_timeout_seconds":{"type":"number","default":30}`,
			`"last_event_id":{"type":["string","integer"]}`)},
	{name: "send_stdin", group: groupExec, title: "Send stdin",
		desc:  "Write input_data to a running execution's stdin (end lines with \"\\n\"); close_stdin ends it.",
		input: object([]string{"execution_id"}, propExecID, `"input_data":{"type":"string"}`, `"close_stdin":{"type":"boolean"}`)},
	{name: "cancel_execution", group: groupExec, title: "Cancel an execution", destructive: true, idempotent: true,
		desc:  "Stop an execution: SIGTERM, then SIGKILL (force: at once).",
		input: object([]string{"execution_id"}, propExecID, `"force":{"type":"boolean"}`)},
	{name: "list_executions", group: groupExec, title: "List executions", readOnly: true, idempotent: true,
		desc:  "Your running and recent executions (this MCP session's, else your key's); session_id: one workspace's.",
		input: object(nil, `"session_id":{"type":"string"}`)},
	{name: "get_execution_status", group: groupExec, title: "Execution status", readOnly: true, idempotent: true,
		desc:  "An execution's status, exit code, command and timing, without output.",
		input: object([]string{"execution_id"}, propExecID)},

	{name: "upload_file", group: groupData, title: "Upload a file", destructive: true,
		desc: "Write a file (base64) into a session's /mnt/data.",
		input: object([]string{"filename", "content_base64"}, propSessionNew, `"filename":{"type":"string","description":"e.g. \"in/sales.csv\""}`,
			`"content_base64":{"type":"string"}`, `"overwrite":{"type":"boolean"}`)},
	{name: "run_python", group: groupData, title: "Run Python", destructive: true, resultChars: true,
		desc: "Run Python in a session's sandbox in /mnt/data (files persist; fresh interpreter per call; pandas, numpy, matplotlib, " +
			"seaborn, scipy, openpyxl, reportlab; no network). Returns stdout, stderr, exit_code (-1: timeout) and new files' download URLs.",
		input: object([]string{"code"}, propSessionNew, `"code":{"type":"string"}`)},
	{name: "read_artifact", group: groupData, title: "Read an artifact", readOnly: true, idempotent: true,
		desc:  "A file of a session's /mnt/data, base64 (over 10 MB: use its download_url).",
		input: object([]string{"session_id", "path"}, propSessionReq, `"path":{"type":"string","description":"e.g. /mnt/data/chart.png"}`)},
	{name: "list_artifacts", group: groupData, title: "List artifacts", readOnly: true, idempotent: true,
		desc:  "The files in a session's /mnt/data: size, MIME type, download URL.",
		input: object([]string{"session_id"}, propSessionReq)},
	{name: "close_session", group: groupData, title: "Close a session", destructive: true, idempotent: true,
		desc:  "Stop a session's runs and delete its files.",
		input: object([]string{"session_id"}, propSessionReq)},

	{name: "list_runtimes", group: groupWorkspace, title: "List runtimes", readOnly: true, idempotent: true,
		desc: "Languages execute_code runs here: version, whether state persists, why one is missing.", input: noArgs},
	{name: "create_session", group: groupWorkspace, title: "Create a workspace",
		desc: "Create a workspace (code runs already use this connection's): an interpreter that keeps variables, files in /mnt/data.",
		input: object([]string{"language"}, `"language":{"type":"string","enum":["python","javascript"]}`, `"memory_limit_mb":{"type":"integer","minimum":64,"maximum":1024}`,
			`"timeout_seconds":{"type":"integer","minimum":60,"maximum":3600,"default":600,"description":"Idle time before it ends."}`,
			`"name":{"type":"string","maxLength":128}`, `"persist":{"type":"boolean","description":"Keep files across restarts (needs name; the name finds it again)."}`)},
	{name: "list_workspaces", group: groupWorkspace, title: "List workspaces", readOnly: true, idempotent: true,
		desc: "Your workspaces: id, name, state, size and expiry.", input: noArgs},
	{name: "destroy_session", group: groupWorkspace, title: "Destroy a workspace", destructive: true, idempotent: true,
		desc: "End a workspace: its interpreter, runs and files.", input: object([]string{"session_id"}, propSessionReq)},
	{name: "get_workspace_info", group: groupWorkspace, title: "Workspace info", readOnly: true, idempotent: true,
		desc: "Variables, imports, run count and memory of a workspace's interpreter.", input: object(nil, propSession, propInterpreter)},
	{name: "reset_workspace", group: groupWorkspace, title: "Reset workspace", destructive: true, idempotent: true,
		desc: "Give a workspace a fresh interpreter (variables go, files stay).", input: object(nil, propInterpreter, propSession)},
	{name: "snapshot_workspace", group: groupWorkspace, title: "Snapshot a workspace",
		desc:  "Save a copy of a workspace's files to restore or fork later.",
		input: object([]string{"session_id", "name"}, propSessionReq, `"name":{"type":"string","maxLength":128}`)},
	{name: "restore_workspace", group: groupWorkspace, title: "Restore a workspace", destructive: true, idempotent: true,
		desc:  "Replace a workspace's files with a snapshot's; its interpreter restarts.",
		input: object([]string{"session_id", "snapshot_id"}, propSessionReq, propSnapshot)},
	{name: "fork_workspace", group: groupWorkspace, title: "Fork a workspace",
		desc: "New workspace from a snapshot's or a workspace's files (give one).", input: object(nil, propSnapshot, propSessionReq)},
	{name: "list_snapshots", group: groupWorkspace, title: "List snapshots", readOnly: true, idempotent: true,
		desc: "Your snapshots: id, name, workspace, size and expiry.", input: noArgs},
	{name: "delete_snapshot", group: groupWorkspace, title: "Delete a snapshot", destructive: true, idempotent: true,
		desc: "Delete one of your snapshots.", input: object([]string{"snapshot_id"}, propSnapshot)},
	{name: "install_package", group: groupWorkspace, title: "Install a package", idempotent: true,
		desc: "pip install from the operator's index into a workspace; its next code run imports it.",
		input: object([]string{"package"}, propSession, `"package":{"type":"string","description":"e.g. \"pandas[excel]\""}`,
			`"version":{"type":"string","description":"e.g. \">=1.0,<2\""}`)},

	{name: "sandbox_run_code", group: groupRunCode, title: "Run code", destructive: true, resultChars: true,
		desc: "Run code in a fresh sandbox whose working directory /mnt/data holds the conversation's files (kept). Returns success, output and the files' download URLs.",
		input: object([]string{"conversationId", "language", "code"}, `"conversationId":{"type":"string","minLength":1}`,
			`"language":{"type":"string","description":"sandbox_list_runners names them."}`, `"code":{"type":"string"}`)},
	{name: "sandbox_list_runners", group: groupRunCode, title: "List runners", readOnly: true, idempotent: true,
		desc: "The languages sandbox_run_code runs here.", input: noArgs},
}

// dottedNames are seed 003's spellings, still answered (not listed: model
// APIs refuse a function name with a dot, ^[a-zA-Z0-9_-]{1,64}$).
var dottedNames = map[string]string{"sandbox.run_code": "sandbox_run_code", "sandbox.list_runners": "sandbox_list_runners"}

func specOf(name string) *toolSpec {
	for i := range catalogue {
		if catalogue[i].name == name {
			return &catalogue[i]
		}
	}
	return nil
}

// ParseTools resolves --tools (profiles, groups and tool names, any
// mix; empty: all) to the set of tool names it offers.
func ParseTools(names []string) (map[string]bool, error) {
	on := map[string]bool{}
	if len(names) == 0 {
		names = []string{"all"}
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if d, ok := dottedNames[n]; ok {
			n = d
		}
		if groups, ok := profiles[n]; ok {
			for _, t := range catalogue {
				if slices.Contains(groups, t.group) {
					on[t.name] = true
				}
			}
			continue
		}
		if specOf(n) == nil {
			return nil, fmt.Errorf("--tools: no profile or tool %q; profiles: %s; tools: %s", n, strings.Join(sortedProfiles(), ", "), strings.Join(toolNames(), ", "))
		}
		on[n] = true
	}
	if len(on) == 0 {
		return nil, fmt.Errorf("--tools names no tool; profiles: %s", strings.Join(sortedProfiles(), ", "))
	}
	return on, nil
}

func sortedProfiles() []string { return slices.Sorted(maps.Keys(profiles)) }

func toolNames() []string {
	var n []string
	for _, t := range catalogue {
		n = append(n, t.name)
	}
	return n
}

// undescribed are property definitions without their descriptions (the
// async variant's properties are execute_code's, described there).
func undescribed(props []string) []string {
	out := make([]string, len(props))
	for i, prop := range props {
		var v map[string]map[string]any
		if json.Unmarshal([]byte("{"+prop+"}"), &v) != nil {
			panic("mcpserver: a property definition is not JSON: " + prop)
		}
		for _, def := range v {
			delete(def, "description")
		}
		b, _ := json.Marshal(v)
		out[i] = string(b[1 : len(b)-1])
	}
	return out
}

// tool builds a tool as it is listed, its description completed with
// extra (the credentials on offer, for the exec tools).
func (s *Server) tool(name, extra string) mcp.Tool {
	sp := specOf(name)
	if sp == nil {
		panic("mcpserver: no catalogue entry for " + name)
	}
	desc := sp.desc
	if strings.Contains(desc, "%d") {
		desc = fmt.Sprintf(desc, s.cfg.ReplyChars)
	}
	t := mcp.NewToolWithRawSchema(name, desc+extra, json.RawMessage(markRoutable(sp.input)))
	t.Title = sp.title
	// Only what differs from the spec's defaults (not read-only,
	// destructive, not idempotent) is said.
	var ann mcp.ToolAnnotation
	if sp.readOnly {
		ann.ReadOnlyHint = boolPtr(true)
	} else {
		if !sp.destructive {
			ann.DestructiveHint = boolPtr(false)
		}
		if sp.idempotent {
			ann.IdempotentHint = boolPtr(true)
		}
	}
	t.Annotations = ann
	if sp.output != "" {
		t.RawOutputSchema = json.RawMessage(sp.output)
	}
	if sp.resultChars {
		t.Meta = mcp.NewMetaFromMap(map[string]any{maxResultSizeKey: s.hostResultChars()})
	}
	return t
}

// maxResultSizeKey is the _meta key Claude Code reads to keep a tool's
// result inline up to that many characters (its default is 50,000; past
// it a result is written to a file and the model sees a preview).
const maxResultSizeKey = "anthropic/maxResultSizeChars"

// hostResultChars is what a reply of a run's output may take: the output
// (JSON escaping can double it) and the result's other fields.
func (s *Server) hostResultChars() int {
	return 2*s.cfg.ReplyChars + 8000
}

// add registers a catalogue tool with its handler.
func (s *Server) add(name string, h server.ToolHandlerFunc) {
	s.mcp.AddTool(s.tool(name, ""), h)
}

// offered is the tool filter of --tools: a tool outside the operator's
// set is neither listed nor callable.
func (s *Server) offered(_ context.Context, tools []mcp.Tool) []mcp.Tool {
	out := tools[:0:0]
	for _, t := range tools {
		if _, dotted := dottedNames[t.Name]; !dotted && s.tools[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// undot answers seed 003's dotted names as the listed ones.
func undot(req *mcp.CallToolRequest) {
	if n, ok := dottedNames[req.Params.Name]; ok {
		req.Params.Name = n
	}
}

// groupOf is the group of a listed tool ("" for none).
func groupOf(name string) string {
	if sp := specOf(name); sp != nil {
		return sp.group
	}
	return ""
}

// instructions is what the server tells a client at initialize, about the
// tools offered only.
func instructions(on map[string]bool) string {
	var b strings.Builder
	b.WriteString("Run commands and code in an OS sandbox (bubblewrap on Linux).")
	if on["execute_code"] {
		b.WriteString(" execute_code waits for the result; a reply holds a bounded share of the output, and get_execution_output " +
			"with since_seq=next_seq reads on. Network and filesystem access beyond the sandbox's private /tmp must be asked for in " +
			"sandbox_config and is limited to what the operator allows.")
	}
	b.WriteString(" State that spans calls lives in handles the server returns: pass a reply's session_id back to keep a " +
		"workspace's files (and variables), and an execution_id to poll, feed or cancel that execution.")
	return b.String()
}
