package mcpserver

import (
	"context"
	_ "embed" // the run view's HTML
	"maps"

	"github.com/mark3labs/mcp-go/mcp"
)

// The run view is an MCP App (the ext-apps extension, 2026-01-26): a host
// that supports it renders this HTML in a sandboxed iframe beside an
// execute_code or run_python call and hands it the call's arguments and
// result over postMessage. The view shows the output, denials and images,
// and re-runs the call; every byte it gets comes through the host's
// tools/call on the caller's own MCP session (read_artifact for images),
// so it can see nothing its caller could not. It has no network of its
// own: the resource declares no domains, and the page's own CSP forbids
// every fetch.
const (
	runAppURI  = "ui://srt-mcp/run.html"
	runAppMIME = "text/html;profile=mcp-app"
)

// runAppHTML is the view, hand-written and self-contained (app/run.html).
//
//go:embed app/run.html
var runAppHTML string

// runAppTools are the tools whose calls the view renders: each returns a
// finished run with its output and, for code, its artifacts.
var runAppTools = map[string]bool{"execute_code": true, "run_python": true}

// runAppResourceMeta is the resource's ext-apps metadata: no connect or
// resource domains (the view is inline and talks only to the host), and a
// border, since it is a panel of output.
func runAppResourceMeta() map[string]any {
	return map[string]any{"ui": map[string]any{
		"csp":           map[string]any{"connectDomains": []string{}, "resourceDomains": []string{}},
		"prefersBorder": true,
	}}
}

// addRunApp registers the view as a resource.
func (s *Server) addRunApp() {
	if !s.tools["execute_code"] && !s.tools["run_python"] {
		return // no tool offered links it
	}
	res := mcp.NewResource(runAppURI, "run_view",
		mcp.WithResourceDescription("Interactive view of an execute_code or run_python call (MCP Apps)"),
		mcp.WithMIMEType(runAppMIME))
	res.Meta = &mcp.Meta{AdditionalFields: runAppResourceMeta()}
	s.mcp.AddResource(res, func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: runAppURI, MIMEType: runAppMIME, Text: runAppHTML,
			Meta: runAppResourceMeta()}}, nil
	})
}

// linkRunApp is a tool filter that names the view in the listing of the
// tools it renders (_meta.ui.resourceUri). It works on the listed copies,
// so a tool registered again later (execute_code at every settings reload)
// keeps the link, and it removes nothing.
func linkRunApp(_ context.Context, tools []mcp.Tool) []mcp.Tool {
	for i := range tools {
		if !runAppTools[tools[i].Name] {
			continue
		}
		fields := map[string]any{}
		var token mcp.ProgressToken
		if m := tools[i].Meta; m != nil {
			maps.Copy(fields, m.AdditionalFields)
			token = m.ProgressToken
		}
		fields["ui"] = map[string]any{"resourceUri": runAppURI}
		tools[i].Meta = &mcp.Meta{ProgressToken: token, AdditionalFields: fields}
	}
	return tools
}
