package mcpserver

import "regexp"

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

// routableProp finds a routable argument's definition in a schema.
var routableProp = regexp.MustCompile(`"(session_id|execution_id|conversationId)":\{"type":"string"`)

// markRoutable adds the x-mcp-header annotations to a tool's input schema
// (in its text, which keeps the properties' order: error messages list a
// tool's arguments in it).
func markRoutable(schema string) string {
	return routableProp.ReplaceAllStringFunc(schema, func(m string) string {
		arg := routableProp.FindStringSubmatch(m)[1]
		return `"` + arg + `":{"x-mcp-header":"` + routableArgs[arg] + `","type":"string"`
	})
}
