package mcpserver

// install_package (seed 001 §5.1.5): pip install into the session, through
// the network proxy, only to the package index's domains and only when the
// operator's ceiling allows them. Packages land in the session's own
// site-packages (its cache directory, on PYTHONPATH in its sandboxes), never
// on the host, and are importable by the next cell.

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/srt-mcp/srt-mcp/service"
)

var (
	pkgName    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?$`)
	pkgVersion = regexp.MustCompile(`^(==|>=|<=|~=|!=|>|<|===)?\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(==|>=|<=|~=|!=|>|<)\s*[A-Za-z0-9.*+!_-]+)*$`)
	installed  = regexp.MustCompile(`Successfully installed (.+)`)
)

func (s *Server) addInstallTool() { s.add("install_package", s.handleInstall) }

func (s *Server) handleInstall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
		Package   string `json:"package"`
		Version   string `json:"version"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	fail := func(code, msg string) (*mcp.CallToolResult, error) {
		return dataError(code, msg, map[string]any{"success": false, "package": a.Package}), nil
	}
	if !pkgName.MatchString(a.Package) {
		return fail("invalid_arguments", fmt.Sprintf("package %q is not a package name (letters, digits, . _ -, optional [extras])", a.Package))
	}
	spec := a.Package
	if v := strings.TrimSpace(a.Version); v != "" {
		if !pkgVersion.MatchString(v) {
			return fail("invalid_arguments", fmt.Sprintf("version %q is not a version or specifier (e.g. 1.2.3 or >=1.0,<2)", a.Version))
		}
		if !strings.ContainsAny(v[:1], "=<>!~") {
			v = "==" + v
		}
		spec += v
	}
	if err := s.svc.CheckPip(); err != nil {
		code, msg := service.CodeOf(err)
		return fail(code, msg)
	}
	c := callerOf(ctx)
	ss, minted, err := s.sessionOrWorkspace(ctx, a.SessionID, true)
	if err != nil {
		return fromErr(err), nil
	}
	r, err := s.svc.Start(ctx, service.Request{Op: "install_package", Kind: "install_package", Caller: c, Workspace: ss, Label: "install_package " + spec,
		Pip: spec, Audit: map[string]any{"package": spec}})
	if err != nil {
		code, msg := service.CodeOf(err)
		return fail(code, msg)
	}
	res := r.Wait(ctx)
	decisions := service.NetworkDecisions(res.Snapshot)
	if !res.OK() {
		msg := strings.TrimSpace(res.Stderr)
		if x := res.Explain("python"); x != "" {
			msg = strings.TrimSpace(msg + "\n" + x)
		}
		if len(msg) > 4000 {
			msg = "..." + msg[len(msg)-4000:]
		}
		return dataError("install_failed", "pip could not install "+spec+": "+msg,
			map[string]any{"success": false, "package": a.Package, "session_id": ss.ID(), "network": decisions}), nil
	}
	version := ""
	if m := installed.FindStringSubmatch(res.Stdout); m != nil {
		norm := strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(strings.SplitN(a.Package, "[", 2)[0], "_", "-"), ".", "-"))
		for _, f := range strings.Fields(m[1]) {
			name, ver, ok := cutLast(f, "-")
			if ok && strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(name, "_", "-"), ".", "-")) == norm {
				version = ver
			}
		}
	}
	v := map[string]any{"success": true, "package": a.Package, "version_installed": version, "session_id": ss.ID(),
		"message": lastLine(res.Stdout), "network": decisions}
	text := fmt.Sprintf("installed %s %s in session %s", a.Package, version, ss.ID())
	if minted {
		v["note"] = handleSentence(ss.ID())
		text += "\n" + handleSentence(ss.ID())
	}
	return reply(v, false), nil
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
