package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Strict arguments: a model that misspells an argument must hear so, not
// get a silent no-op (send_stdin {"input": ...} used to answer "wrote 0
// bytes" and leave the program waiting). Every tool call's argument names
// are checked against the tool's input schema before its handler runs: an
// unknown name is an invalid_arguments error naming what the tool takes
// and the closest match; a missing required one is named too.

// argNames are one tool's accepted and required argument names.
type argNames struct {
	accepted []string // in the schema's order
	known    map[string]bool
	required []string
}

// strictArgs caches each tool's names (tools are registered before the
// server serves and do not change afterwards).
type strictArgs struct {
	mu    sync.Mutex
	tools map[string]*argNames
}

// namesOf reads the property names of a raw JSON input schema, in order.
func namesOf(schema json.RawMessage) *argNames {
	n := &argNames{known: map[string]bool{}}
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	n.required = s.Required
	dec := json.NewDecoder(strings.NewReader(string(s.Properties)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil
		}
		n.accepted = append(n.accepted, name)
		n.known[name] = true
	}
	return n
}

func (st *strictArgs) names(t mcp.Tool) *argNames {
	st.mu.Lock()
	defer st.mu.Unlock()
	if n, ok := st.tools[t.Name]; ok {
		return n
	}
	raw := t.RawInputSchema
	if raw == nil {
		raw, _ = json.Marshal(t.InputSchema)
	}
	n := namesOf(raw)
	if st.tools == nil {
		st.tools = map[string]*argNames{}
	}
	st.tools[t.Name] = n
	return n
}

// check returns what is wrong with args for the tool ("" when nothing).
func (n *argNames) check(tool string, args map[string]any) string {
	var unknown []string
	for k := range args {
		if !n.known[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	takes := tool + " takes no arguments"
	if len(n.accepted) > 0 {
		takes = tool + " takes " + strings.Join(n.accepted, ", ")
	}
	if len(unknown) > 0 {
		k := unknown[0]
		msg := fmt.Sprintf("unknown argument %q; %s", k, takes)
		if len(unknown) > 1 {
			msg = fmt.Sprintf("unknown arguments %s; %s", quoteAll(unknown), takes)
		}
		if m := closest(k, n.accepted); m != "" {
			msg += " — did you mean " + m + "?"
		}
		return msg
	}
	for _, r := range n.required {
		if v, ok := args[r]; !ok || v == nil {
			return fmt.Sprintf("missing required argument %q; %s", r, takes)
		}
	}
	return ""
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// closest is the accepted name nearest to k (edit distance, or one being
// a part of the other), "" when none is near.
func closest(k string, accepted []string) string {
	lk := strings.ToLower(k)
	best, bestD := "", 1<<30
	for _, a := range accepted {
		la := strings.ToLower(a)
		d := editDistance(lk, la)
		if strings.Contains(la, lk) || strings.Contains(lk, la) {
			d = min(d, 1+abs(len(la)-len(lk))/4)
		}
		if d < bestD {
			best, bestD = a, d
		}
	}
	if bestD <= max(2, len(k)/3) {
		return best
	}
	return ""
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// strict is the tool middleware that applies the check.
func (s *Server) strict(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		st := s.mcp.GetTool(req.Params.Name)
		if st == nil {
			return next(ctx, req)
		}
		n := s.args.names(st.Tool)
		if n == nil {
			return next(ctx, req)
		}
		args, ok := req.Params.Arguments.(map[string]any)
		if !ok && req.Params.Arguments != nil {
			return s.argumentError(req.Params.Name, "arguments must be a JSON object"), nil
		}
		if msg := n.check(req.Params.Name, args); msg != "" {
			return s.argumentError(req.Params.Name, msg), nil
		}
		if sc, ok := args["sandbox_config"]; ok {
			if msg := sandboxConfigKeys.check("sandbox_config", sc); msg != "" {
				return s.argumentError(req.Params.Name, msg), nil
			}
		}
		return next(ctx, req)
	}
}

// argumentError is invalid_arguments in the shape of the tool's own errors.
func (s *Server) argumentError(tool, msg string) *mcp.CallToolResult {
	switch {
	case executionTools[tool]:
		return toolError("invalid_arguments", msg)
	case groupOf(tool) == groupRunCode: // seed 003's shape
		return reply(map[string]any{"success": false, "output": "invalid_arguments: " + msg, "files": []any{}, "error": "invalid_arguments"}, true)
	}
	return dataError("invalid_arguments", msg, nil)
}

// keyTree is the keys an argument's objects take, nested: a nil subtree
// is a value of its own (a string, a list of strings, a boolean); a
// subtree applies to an object and to each object of a list.
type keyTree map[string]keyTree

// sandboxConfigKeys are what a call's sandbox_config may say. The listing
// describes it in a line instead of a nested schema, so the names are
// checked here: a misspelt key would otherwise be dropped silently (a
// run without the network it asked for).
var sandboxConfigKeys = keyTree{
	"network": {"allowed_domains": nil, "denied_domains": nil, "require_host_match": nil,
		"request_rules": {"host": nil, "methods": nil, "paths": nil}},
	"filesystem":  {"allow_read": nil, "allow_write": nil, "deny_read": nil, "deny_write": nil},
	"credentials": nil,
}

// check returns what is wrong with v at path ("" when nothing).
func (t keyTree) check(path string, v any) string {
	switch x := v.(type) {
	case []any:
		for i, e := range x {
			if msg := t.check(fmt.Sprintf("%s[%d]", path, i), e); msg != "" {
				return msg
			}
		}
	case map[string]any:
		keys := slices.Sorted(maps.Keys(t))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			sub, ok := t[k]
			if !ok {
				msg := fmt.Sprintf("unknown key %q in %s; it takes %s", k, path, strings.Join(keys, ", "))
				if m := closest(k, keys); m != "" {
					msg += " — did you mean " + m + "?"
				}
				return msg
			}
			if sub != nil {
				if msg := sub.check(path+"."+k, x[k]); msg != "" {
					return msg
				}
			}
		}
	case nil:
	default:
		if path == "sandbox_config" {
			return "sandbox_config must be an object"
		}
	}
	return ""
}
