package mcpserver

// install_package (seed 001 §5.1.5): pip install into the session, through
// the network proxy, only to the package index's domains and only when the
// operator's ceiling allows them. Packages land in the session's own
// site-packages (its cache directory, on PYTHONPATH in its sandboxes), never
// on the host, and are importable by the next cell.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// DefaultPipIndex is PyPI's simple index.
const DefaultPipIndex = "https://pypi.org/simple"

var (
	pkgName    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?$`)
	pkgVersion = regexp.MustCompile(`^(==|>=|<=|~=|!=|>|<|===)?\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(==|>=|<=|~=|!=|>|<)\s*[A-Za-z0-9.*+!_-]+)*$`)
	installed  = regexp.MustCompile(`Successfully installed (.+)`)
)

// pipDomains are the hosts pip talks to for an index: the index's own
// host (with its port when not the scheme's), and PyPI's file host for PyPI.
func pipDomains(index string) ([]string, *url.URL, error) {
	u, err := url.Parse(index)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, nil, fmt.Errorf("the package index %q is not an http(s) URL", index)
	}
	host := u.Hostname()
	if p := u.Port(); p != "" && !((u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443")) {
		host = net.JoinHostPort(u.Hostname(), p)
	}
	d := []string{host}
	if u.Hostname() == "pypi.org" {
		d = append(d, "files.pythonhosted.org")
	}
	return d, u, nil
}

func (s *Server) addInstallTool() {
	t := mcp.NewToolWithRawSchema("install_package", "Install a Python package into a session with pip (from the operator's package index, through the sandbox's network proxy). It is importable by the next execute_code call in that session. Omit session_id for this connection's workspace.",
		json.RawMessage(`{"type": "object", "properties": {
  "session_id": {"type": "string", "description": "Session to install into; omit for this connection's workspace."},
  "package": {"type": "string", "description": "Package name, e.g. \"requests\" or \"pandas[excel]\"."},
  "version": {"type": "string", "description": "Optional version or specifier, e.g. \"2.31.0\" or \">=1.0,<2\"."}},
  "required": ["package"], "additionalProperties": false}`))
	t.Title = "Install Python package"
	annotations(t.Title, false, false, true, true)(&t)
	s.mcp.AddTool(t, s.handleInstall)
}

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
		if strings.IndexAny(v[:1], "=<>!~") < 0 {
			v = "==" + v
		}
		spec += v
	}
	domains, index, err := pipDomains(s.data.PipIndex)
	if err != nil {
		return fail("invalid_configuration", err.Error())
	}
	narrowed, err := policy.Narrow(s.cfg.Ceiling, policy.Policy{Network: policy.Network{AllowedDomains: domains}}, "/", s.cfg.Home)
	if err != nil {
		var pe *policy.Error
		if errors.As(err, &pe) && pe.Code == policy.CodeExceedsCeiling {
			return fail("network_not_allowed", fmt.Sprintf("install_package needs network access to %s (the package index %s), which the operator does not allow; the operator allows it with --allow-domain %s (SANDBOX_ALLOWED_DOMAINS)",
				strings.Join(domains, " and "), s.data.PipIndex, strings.Join(domains, " --allow-domain ")))
		}
		return fail("invalid_configuration", err.Error())
	}
	ss, err := s.sessionOrWorkspace(ctx, a.SessionID, true)
	if err != nil {
		return fromErr(err), nil
	}
	if err := ss.Acquire(); err != nil {
		return fromErr(err), nil
	}
	defer ss.Release()
	argv := []string{s.data.Python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-warn-script-location",
		"--upgrade", "--target", sessions.SitePackages, "--index-url", s.data.PipIndex}
	if index.Scheme == "http" {
		argv = append(argv, "--trusted-host", index.Hostname())
	}
	argv = append(argv, spec)
	rs := s.dataSpec(ss, argv)
	rs.Policy.Network = narrowed.Network
	rs.Policy.Limits.Timeout = policy.Duration(5 * time.Minute)
	rs.Policy.Limits.MaxOutputBytes = 1 << 20
	e, err := s.mgr.StartWith(dataOwner(ss.ID), "install_package "+spec, rs, s.starter(ss))
	if err != nil {
		return fromErr(err), nil
	}
	s.observe("install_package", "python", e)
	sn := waitEnd(ctx, e)
	out, errOut := outputs(sn)
	var stdout, stderr strings.Builder
	stdout.Write(out)
	stderr.Write(errOut)
	decisions := networkDecisions(sn)
	s.audit(ss, map[string]any{"op": "install_package", "package": spec, "network": decisions, "exit_code": exitCode(sn)})
	if sn.End == nil || sn.End.Type != runner.EventExit || sn.End.ExitCode != 0 {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && sn.End != nil {
			msg = sn.End.ErrCode + " " + sn.End.Message
		}
		if len(msg) > 4000 {
			msg = "..." + msg[len(msg)-4000:]
		}
		return dataError("install_failed", "pip could not install "+spec+": "+msg,
			map[string]any{"success": false, "package": a.Package, "session_id": ss.ID, "network": decisions}), nil
	}
	version := ""
	if m := installed.FindStringSubmatch(stdout.String()); m != nil {
		norm := strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(strings.SplitN(a.Package, "[", 2)[0], "_", "-"), ".", "-"))
		for _, f := range strings.Fields(m[1]) {
			name, ver, ok := cutLast(f, "-")
			if ok && strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(name, "_", "-"), ".", "-")) == norm {
				version = ver
			}
		}
	}
	v := map[string]any{"success": true, "package": a.Package, "version_installed": version, "session_id": ss.ID,
		"message": lastLine(stdout.String()), "network": decisions}
	return mcp.NewToolResultStructured(v, fmt.Sprintf("installed %s %s in session %s", a.Package, version, ss.ID)), nil
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
