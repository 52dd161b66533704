package mcpserver

import (
	"encoding/json"
	"regexp"
)

// Routable handles (SEP-2243): the arguments that name server-side state
// are marked with x-mcp-header, so a 2026-07-28 client mirrors them into
// Mcp-Param-* headers and a load balancer or gateway can route a call to
// the replica that holds its state without reading the body. mcp-go checks
// each such header against the body (a mismatch is the JSON-RPC error
// -32020, HeaderMismatch). Handles carry no secret.
var routableArgs = map[string]string{
	"session_id":     "Session-Id",      // Mcp-Param-Session-Id
	"execution_id":   "Execution-Id",    // Mcp-Param-Execution-Id
	"conversationId": "Conversation-Id", // Mcp-Param-Conversation-Id (seed 003)
}

// markRoutable adds the x-mcp-header annotations to every registered tool
// (in place in the schema's text, which keeps the properties' order: error
// messages list a tool's arguments in it).
func (s *Server) markRoutable() {
	for _, st := range s.mcp.ListTools() {
		t := st.Tool
		if t.RawInputSchema == nil {
			continue
		}
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.RawInputSchema, &schema) != nil {
			continue
		}
		raw := string(t.RawInputSchema)
		for arg, header := range routableArgs {
			if p, ok := schema.Properties[arg]; !ok || p.Type != "string" {
				continue
			}
			re := regexp.MustCompile(`"` + regexp.QuoteMeta(arg) + `"\s*:\s*\{`)
			if loc := re.FindStringIndex(raw); loc != nil {
				raw = raw[:loc[1]] + `"x-mcp-header": "` + header + `", ` + raw[loc[1]:]
			}
		}
		if raw == string(t.RawInputSchema) {
			continue
		}
		t.RawInputSchema = json.RawMessage(raw)
		s.mcp.AddTool(t, st.Handler)
	}
}
