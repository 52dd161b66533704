package mcpserver

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The listing names the view on the tools it renders only, keeps any
// other _meta a tool has, and adds only a few bytes.
func TestLinkRunApp(t *testing.T) {
	other := mcp.Tool{Name: "read_artifact"}
	withMeta := mcp.Tool{Name: "run_python", Meta: &mcp.Meta{AdditionalFields: map[string]any{"x": 1}}}
	got := linkRunApp(context.Background(), []mcp.Tool{{Name: "execute_code"}, other, withMeta})
	if len(got) != 3 || got[1].Meta != nil {
		t.Fatalf("filter changed the list or an unrelated tool: %+v", got)
	}
	for _, tool := range []mcp.Tool{got[0], got[2]} {
		b, _ := json.Marshal(tool.Meta)
		if !strings.Contains(string(b), `"ui":{"resourceUri":"`+runAppURI+`"}`) {
			t.Errorf("%s: _meta %s", tool.Name, b)
		}
	}
	if got[2].Meta.AdditionalFields["x"] != 1 || withMeta.Meta.AdditionalFields["ui"] != nil {
		t.Errorf("run_python's own _meta lost or the registered tool changed: %v / %v", got[2].Meta.AdditionalFields, withMeta.Meta.AdditionalFields)
	}
	if b, _ := json.Marshal(got[0].Meta); len(b) > 64 {
		t.Errorf("the link costs %d bytes of the catalogue: %s", len(b), b)
	}
}

// The view is small and self-contained: no URL it could load, a CSP that
// forbids fetching, and no HTML built from strings.
func TestRunAppSelfContained(t *testing.T) {
	if n := len(runAppHTML); n > 16<<10 {
		t.Errorf("the view is %d bytes", n)
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|https?://|@import|url\(`).FindString(runAppHTML); m != "" {
		t.Errorf("the view refers to something outside itself: %q", m)
	}
	if !strings.Contains(runAppHTML, "default-src 'none'") || !strings.Contains(runAppHTML, "connect-src 'none'") {
		t.Error("the view's CSP does not forbid fetching")
	}
	if strings.Contains(runAppHTML, "innerHTML") || strings.Contains(runAppHTML, "document.write") {
		t.Error("the view builds HTML from strings; output is untrusted")
	}
}

// The catalogue's budget holds with the links in (tools/list applies the
// filter after the catalogue is built), and the other _meta stays.
func TestRunAppLinkWithinCatalogueBudget(t *testing.T) {
	s := catalogueServer(t)
	var tools []mcp.Tool
	for _, sp := range catalogue {
		if s.tools[sp.name] {
			tools = append(tools, s.tool(sp.name, ""))
		}
	}
	tools = linkRunApp(context.Background(), tools)
	b, err := json.Marshal(map[string]any{"tools": tools})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 12<<10 {
		t.Errorf("the catalogue with the view's links is %d bytes; the budget is %d", len(b), 12<<10)
	}
	linked := 0
	for _, tl := range tools {
		if tl.Meta == nil || tl.Meta.AdditionalFields["ui"] == nil {
			continue
		}
		linked++
		if tl.Meta.AdditionalFields[maxResultSizeKey] == nil {
			t.Errorf("%s lost its %s", tl.Name, maxResultSizeKey)
		}
	}
	if linked != len(runAppTools) {
		t.Errorf("%d tools link the view; want %d", linked, len(runAppTools))
	}
	t.Logf("catalogue with links: %d bytes", len(b))
}
