package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // decoders for previews
	_ "image/jpeg"
	"image/png"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/image/draw"

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// DataConfig sets seed 000's limits (env names in the README).
type DataConfig struct {
	Sessions        *sessions.Registry
	Python          string             // interpreter inside the sandbox (/usr/bin/python3)
	ExecTimeout     time.Duration      // SANDBOX_EXEC_TIMEOUT_S (60s)
	MaxOutputBytes  int64              // SANDBOX_MAX_OUTPUT_BYTES (100 KB) per stream
	MaxCodeBytes    int                // SANDBOX_MAX_CODE_BYTES (100 KB)
	MaxUploadBytes  int64              // SANDBOX_MAX_UPLOAD_BYTES (50 MB)
	MaxArtifactRead int64              // SANDBOX_MAX_ARTIFACT_READ_BYTES (10 MB)
	Files           *FileSigner        // signs download URLs; nil: no download_url
	Backend         executions.Backend // native (default) or docker
	PreviewBytes    int                // largest image preview (64 KB)
	WarmPool        int                // sessions kept ready with a warmed Python kernel (SANDBOX_WARM_POOL)
	PipIndex        string             // install_package's index (SANDBOX_PIP_INDEX_URL)
	Node            string             // the JavaScript interpreter (SANDBOX_NODE)
}

func (s *Server) addDataTools(dc DataConfig) {
	if dc.Sessions == nil {
		return
	}
	if dc.Python == "" {
		dc.Python = "/usr/bin/python3"
	}
	if dc.ExecTimeout <= 0 {
		dc.ExecTimeout = 60 * time.Second
	}
	if dc.MaxOutputBytes <= 0 {
		dc.MaxOutputBytes = 100 << 10
	}
	if dc.MaxCodeBytes <= 0 {
		dc.MaxCodeBytes = 100 << 10
	}
	if dc.MaxUploadBytes <= 0 {
		dc.MaxUploadBytes = 50 << 20
	}
	if dc.MaxArtifactRead <= 0 {
		dc.MaxArtifactRead = 10 << 20
	}
	if dc.PreviewBytes <= 0 {
		dc.PreviewBytes = 64 << 10
	}
	if dc.Backend == nil {
		dc.Backend = &executions.Native{Launch: s.mgr.Starter()}
	}
	s.data = &dc
	s.ws = newWorkspaces()
	s.addWorkspaceTools()
	if dc.Node == "" {
		s.data.Node = "/usr/bin/node"
	}
	if dc.PipIndex == "" {
		s.data.PipIndex = DefaultPipIndex
	}
	s.addInstallTool()
	s.addSeed003Tools()
	go s.runtimes() // discovered at start-up, off the first call's path
	s.startPool(dc.WarmPool)
	go s.buildCacheTemplate()
	dc.Sessions.OnEnd(func(ss *sessions.Session) {
		s.mgr.CancelOwner(dataOwner(ss.ID), true)
		s.closeKernels(ss.ID)
		if err := dc.Backend.Destroy(sessions.BoxOf(ss)); err != nil {
			s.cfg.Logger.Warn("removing a session's sandbox", "session_id", ss.ID, "error", err)
		}
	})
	sessionProp := `"session_id": {"type": "string", "description": "Session to use (sess_ + 12 hex digits). Omit to start a new session; the reply always names it."}`
	requiredSession := `"session_id": {"type": "string", "description": "An existing session (sess_ + 12 hex digits)."}`
	add := func(name, title, desc, schema string, readOnly, destructive, idempotent bool, h server.ToolHandlerFunc) {
		t := mcp.NewToolWithRawSchema(name, desc, json.RawMessage(schema))
		t.Title = title
		annotations(title, readOnly, destructive, idempotent, false)(&t)
		s.mcp.AddTool(t, h)
	}
	add("upload_file", "Upload a file", "Upload a data file into the session's /mnt/data (base64 content). Errors: file_exists (set overwrite), invalid_path, too_large, max_sessions.",
		`{"type": "object", "properties": {`+sessionProp+`,
  "filename": {"type": "string", "description": "Name inside /mnt/data, e.g. \"sales.csv\" or \"in/sales.csv\"; no \"..\", no absolute paths outside /mnt/data."},
  "content_base64": {"type": "string", "description": "The file's bytes, base64-encoded."},
  "overwrite": {"type": "boolean", "default": false}},
  "required": ["filename", "content_base64"], "additionalProperties": false}`, false, true, false, s.handleUpload)
	add("run_python", "Run Python", "Run Python code in the session's sandbox (cwd /mnt/data; pandas, numpy, matplotlib (Agg), seaborn, scipy, openpyxl, reportlab available; no network). Each call is a fresh interpreter; files in /mnt/data persist. Returns stdout, stderr, exit_code and the files the run created or changed (only when exit_code is 0) with download URLs; exit_code -1 means the run timed out.",
		`{"type": "object", "properties": {`+sessionProp+`,
  "code": {"type": "string", "description": "Python source (at most 100 KB)."}},
  "required": ["code"], "additionalProperties": false}`, false, true, false, s.handleRunPython)
	add("read_artifact", "Read an artifact", "Read a file from the session's /mnt/data as base64 (at most 10 MB; larger files: use download_url).",
		`{"type": "object", "properties": {`+requiredSession+`,
  "path": {"type": "string", "description": "Absolute path inside /mnt/data, e.g. /mnt/data/chart.png."}},
  "required": ["session_id", "path"], "additionalProperties": false}`, true, false, true, s.handleReadArtifact)
	add("list_artifacts", "List artifacts", "List every file in the session's /mnt/data with size, MIME type and download URL.",
		`{"type": "object", "properties": {`+requiredSession+`}, "required": ["session_id"], "additionalProperties": false}`, true, false, true, s.handleListArtifacts)
	add("close_session", "Close a session", "Close the session: stop its runs and delete its files.",
		`{"type": "object", "properties": {`+requiredSession+`}, "required": ["session_id"], "additionalProperties": false}`, false, true, true, s.handleCloseSession)
	s.mcp.AddResourceTemplate(mcp.NewResourceTemplate("artifact://{session_id}/{filename}", "artifact",
		mcp.WithTemplateDescription("A file in a session's /mnt/data")), s.readArtifactResource)
}

// buildCacheTemplate runs the data profile's imports once, in a sandbox,
// with a fresh cache directory, and installs it as the template every new
// session's cache starts from: matplotlib's font list then costs its half
// second once per server instead of once per session.
func (s *Server) buildCacheTemplate() {
	tmp, err := s.data.Sessions.MkdirTemp("cache-build-")
	if err != nil {
		return
	}
	defer nofollow.RemoveAll(tmp) // a tree a sandbox wrote
	uid, free := s.data.Sessions.SessionUID()
	defer free()
	box := sessions.Box{SessionID: "cache-template", Workspace: filepath.Join(tmp, "data"), Cache: filepath.Join(tmp, "cache"), UID: uid}
	for _, d := range []string{box.Workspace, box.Cache} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return
		}
		if uid != 0 {
			_ = os.Chown(d, uid, uid)
		} else if o := s.data.Sessions.Owner(); o != nil {
			_ = os.Chown(d, o.UID, o.GID)
		}
	}
	defer func() { _ = s.data.Backend.Destroy(box) }()
	p := s.cfg.Ceiling
	p.Network = policy.Network{}
	p.Filesystem = policy.Filesystem{}
	p.Limits.Timeout = policy.Duration(2 * time.Minute)
	spec := runner.Spec{
		Version: runner.SpecVersion,
		Argv:    []string{s.data.Python, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.font_manager"},
		Cwd:     runner.SandboxTmp,
		Policy:  p,
		Stdin:   runner.StdinNull,
		Hide:    s.cfg.Hide,
	}
	e, err := s.mgr.StartWith("server", "cache-template", spec, func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		return s.data.Backend.Start(box, spec, sink)
	})
	if err != nil {
		return
	}
	sn := e.Wait(context.Background(), 0, true)
	if sn.End == nil || sn.End.Type != runner.EventExit || sn.End.ExitCode != 0 {
		s.cfg.Logger.Debug("no cache template for data sessions (matplotlib missing?)", "end", sn.End)
		return
	}
	if err := s.data.Sessions.SetCacheTemplate(box.Cache); err != nil {
		s.cfg.Logger.Warn("cache template", "error", err)
	}
}

// starter launches runs of a session on its backend.
func (s *Server) starter(ss *sessions.Session) executions.Starter {
	box := sessions.BoxOf(ss)
	return func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		return s.data.Backend.Start(box, spec, sink)
	}
}

func dataOwner(sessionID string) string { return "data:" + sessionID }

// dataError is seed 000's error shape: {"error": code, "message": ...}.
func dataError(code, msg string, extra map[string]any) *mcp.CallToolResult {
	v := map[string]any{"error": code, "message": msg}
	for k, x := range extra {
		v[k] = x
	}
	r := mcp.NewToolResultStructured(v, code+": "+msg)
	r.IsError = true
	return r
}

func fromErr(err error) *mcp.CallToolResult {
	var se *sessions.Error
	if errors.As(err, &se) {
		return dataError(se.Code, se.Message, nil)
	}
	return dataError("internal_error", err.Error(), nil)
}

func (s *Server) artifactJSON(sessionID string, f sessions.FileInfo) map[string]any {
	v := map[string]any{"path": f.Path, "filename": f.Filename, "size_bytes": f.Size, "mime_type": f.MIME}
	if s.data.Files != nil {
		v["download_url"] = s.data.Files.URL(sessionID, f.Filename)
	}
	return v
}

func (s *Server) handleUpload(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
		Filename  string `json:"filename"`
		Content   string `json:"content_base64"`
		Overwrite bool   `json:"overwrite"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	rel, err := sessions.CleanName(a.Filename)
	if err != nil {
		return fromErr(err), nil
	}
	if int64(base64.StdEncoding.DecodedLen(len(a.Content))) > s.data.MaxUploadBytes+3 {
		return dataError("too_large", fmt.Sprintf("the upload is larger than the %d-byte limit (SANDBOX_MAX_UPLOAD_BYTES)", s.data.MaxUploadBytes), nil), nil
	}
	data, err := base64.StdEncoding.DecodeString(a.Content)
	if err != nil {
		return dataError("invalid_arguments", "content_base64 is not valid base64: "+err.Error(), nil), nil
	}
	if int64(len(data)) > s.data.MaxUploadBytes {
		return dataError("too_large", fmt.Sprintf("the upload is %d bytes, more than the %d-byte limit (SANDBOX_MAX_UPLOAD_BYTES)", len(data), s.data.MaxUploadBytes), nil), nil
	}
	ss, created, err := s.data.Sessions.GetOrCreate(a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	if err := ss.Acquire(); err != nil {
		return fromErr(err), nil
	}
	p, err := ss.WriteFile(rel, data, a.Overwrite)
	ss.Release()
	if err != nil && created {
		// A session the caller never got the name of would linger until
		// its idle TTL and count against max_sessions.
		_ = s.data.Sessions.Close(ss.ID)
	}
	if err != nil {
		var se *sessions.Error
		if errors.As(err, &se) {
			s.audit(ss, map[string]any{"op": "upload_file", "path": a.Filename, "size_bytes": len(data), "error": se.Code})
		}
		return fromErr(err), nil
	}
	s.audit(ss, map[string]any{"op": "upload_file", "path": p, "size_bytes": len(data), "sha256": sha(data)})
	v := map[string]any{"session_id": ss.ID, "path": p}
	return mcp.NewToolResultStructured(v, fmt.Sprintf("uploaded %s (%d bytes) to session %s", p, len(data), ss.ID)), nil
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (s *Server) audit(ss *sessions.Session, v map[string]any) {
	v["ts"] = time.Now().UTC().Format(time.RFC3339Nano)
	v["session_id"] = ss.ID
	b, _ := json.Marshal(v)
	ss.Audit(b)
}

func newRunID() string {
	return "run_" + time.Now().UTC().Format("20060102T150405Z") + "_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:4]
}

func (s *Server) handleRunPython(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
		Code      string `json:"code"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if len(a.Code) > s.data.MaxCodeBytes {
		return dataError("code_too_large", fmt.Sprintf("code is %d bytes, more than the %d-byte limit (SANDBOX_MAX_CODE_BYTES)", len(a.Code), s.data.MaxCodeBytes), nil), nil
	}
	if strings.ContainsRune(a.Code, 0) {
		return dataError("invalid_arguments", "code contains a NUL byte", nil), nil
	}
	ss, _, err := s.data.Sessions.GetOrCreate(a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	if err := ss.Acquire(); err != nil {
		return fromErr(err), nil
	}
	defer ss.Release()
	runID := newRunID()
	before := ss.Listing()
	spec := s.dataSpec(ss, []string{s.data.Python, "-c", a.Code})
	e, err := s.mgr.StartWith(dataOwner(ss.ID), "run_python", spec, s.starter(ss))
	if err != nil {
		return fromErr(err), nil
	}
	s.observe("run_python", "python", e)
	sn := waitEnd(ctx, e)
	if sn.End != nil && sn.End.Type == runner.EventError {
		// The sandbox could not run the code at all: say why, not a fake exit code.
		s.cfg.Logger.Warn("run_python", "session_id", ss.ID, "run_id", runID, "error", sn.End.ErrCode, "message", sn.End.Message)
		msg := sn.End.Message
		if sn.End.ErrCode == runner.ErrCodeNotFound || sn.End.ErrCode == runner.ErrCodeNotExecutable {
			msg = fmt.Sprintf("the Python interpreter %s is missing on this host (%s); the operator installs the data profile with: apt-get install -y %s",
				s.data.Python, msg, strings.Join(dataPackages, " "))
		}
		return dataError(sn.End.ErrCode, msg, map[string]any{"session_id": ss.ID, "run_id": runID}), nil
	}
	res := s.runResult(ss, runID, sn, before)
	if h := missingModuleHint(res["stderr"].(string)); h != "" {
		res["hint"] = h
	}
	s.audit(ss, map[string]any{"op": "run_python", "run_id": runID, "code_bytes": len(a.Code), "code_sha256": sha([]byte(a.Code)),
		"exit_code": res["exit_code"], "duration_ms": res["duration_ms"], "network": networkDecisions(sn)})
	s.cfg.Logger.Info("run_python", "session_id", ss.ID, "run_id", runID, "duration_ms", res["duration_ms"], "exit_code", res["exit_code"])
	out := mcp.NewToolResultStructured(res, pythonSummary(res))
	out.Content = append(out.Content, s.artifactContent(ss, res)...)
	return out, nil
}

// dataSpec is the sandbox of a data session's run: the workspace at
// /mnt/data, no network, seed 000's limits under the operator's ceiling.
func (s *Server) dataSpec(ss *sessions.Session, argv []string) runner.Spec {
	return runner.Spec{
		Version: runner.SpecVersion,
		Argv:    argv,
		Cwd:     sessions.WorkspaceMount,
		Home:    s.cfg.Home,
		Policy:  s.dataPolicy(s.data.ExecTimeout),
		Stdin:   runner.StdinNull,
		Hide:    s.cfg.Hide,
	}
}

// dataPolicy is the policy of code runs: no network, no host paths beyond
// the system view (the operator's deny_read kept), the operator's limits
// with the data profile's timeout and output cap.
func (s *Server) dataPolicy(timeout time.Duration) policy.Policy {
	p := s.cfg.Ceiling
	p.Network = policy.Network{} // seed 000: no egress from a data session
	p.Filesystem = policy.Filesystem{DenyRead: s.cfg.Ceiling.Filesystem.DenyRead}
	p.Limits.Timeout = policy.Duration(timeout)
	p.Limits.MaxOutputBytes = s.data.MaxOutputBytes
	return p
}

// scriptSpec runs code of a registry language in the session's sandbox.
func (s *Server) scriptSpec(ss *sessions.Session, rt *profiles.Runtime, code string, timeout time.Duration) runner.Spec {
	spec := s.dataSpec(ss, rt.Argv(code))
	spec.Policy.Limits.Timeout = policy.Duration(timeout)
	return spec
}

// dataPackages are the Debian packages of the Python data profile.
var dataPackages = []string{"python3", "python3-pandas", "python3-numpy", "python3-matplotlib", "python3-seaborn",
	"python3-reportlab", "python3-openpyxl", "python3-scipy"}

var missingModule = regexp.MustCompile(`ModuleNotFoundError: No module named '([A-Za-z0-9_]+)`)

// missingModuleHint explains a ModuleNotFoundError: a module of the data
// profile missing on this host is the operator's to install; any other
// module is not available (the sandbox has no network to install it).
func missingModuleHint(stderr string) string {
	m := missingModule.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	for _, p := range dataPackages[1:] {
		if p == "python3-"+m[1] {
			return fmt.Sprintf("%s belongs to the Python data profile but is not installed on this host; the operator installs it with: apt-get install -y %s", m[1], p)
		}
	}
	return fmt.Sprintf("module %s is not available in the sandbox (the data profile has pandas, numpy, matplotlib, seaborn, scipy, openpyxl and reportlab, and runs without network access)", m[1])
}

// holdSession keeps ss (acquired by the caller) busy while e runs:
// closing the session cancels e; when e ends, onEnd runs, the audit line
// (fields plus the end, exit code, duration and network decisions) is
// written and the session released. The channel closes after that.
func (s *Server) holdSession(ss *sessions.Session, e *executions.Execution, fields map[string]any, onEnd func()) <-chan struct{} {
	released := make(chan struct{})
	unhook := ss.OnClose(func() { _ = e.Cancel(true) })
	go func() {
		<-e.Done()
		unhook()
		if onEnd != nil {
			onEnd()
		}
		sn := e.Snapshot(0)
		fields["execution_id"], fields["network"] = e.ID, networkDecisions(sn)
		if sn.End != nil {
			fields["end"], fields["exit_code"], fields["duration_ms"] = sn.End.Type, sn.End.ExitCode, sn.End.DurationMS
		}
		s.audit(ss, fields)
		ss.Release()
		close(released)
	}()
	return released
}

// artifactsSince lists, as seed 000's artifact objects, the files new or
// changed in the session since before.
func (s *Server) artifactsSince(ss *sessions.Session, before sessions.Listing) []map[string]any {
	arts := []map[string]any{}
	for _, f := range ss.Artifacts(before) {
		arts = append(arts, s.artifactJSON(ss.ID, f))
	}
	return arts
}

// outputs concatenates an execution's stdout and stderr events.
func outputs(sn executions.Snapshot) (stdout, stderr []byte) {
	for _, e := range sn.Events {
		switch e.Type {
		case runner.EventStdout:
			stdout = append(stdout, e.Data...)
		case runner.EventStderr:
			stderr = append(stderr, e.Data...)
		}
	}
	return stdout, stderr
}

// waitEnd waits for e to end; if ctx ends first (the caller went away),
// the execution is cancelled and its end awaited.
func waitEnd(ctx context.Context, e *executions.Execution) executions.Snapshot {
	sn := e.Wait(ctx, 0, true)
	if !sn.State.Done() {
		_ = e.Cancel(true)
		sn = e.Wait(context.Background(), 0, true)
	}
	return sn
}

func networkDecisions(sn executions.Snapshot) []string {
	var out []string
	for _, e := range sn.Events {
		if v := e.Violation; v != nil && v.Kind == "network" && v.Decision != "transfer" {
			out = append(out, fmt.Sprintf("%s %s:%d", v.Decision, v.Host, v.Port))
		}
	}
	return out
}

// runResult is seed 000's run_python response.
func (s *Server) runResult(ss *sessions.Session, runID string, sn executions.Snapshot, before sessions.Listing) map[string]any {
	stdout, stderr := outputs(sn)
	trunc := map[string]bool{}
	for _, t := range sn.Truncated {
		trunc[t] = true
	}
	res := map[string]any{"session_id": ss.ID, "run_id": runID, "stdout_truncated": trunc["stdout"], "stderr_truncated": trunc["stderr"]}
	code, dur := -1, int64(0)
	if sn.End != nil {
		dur = sn.End.DurationMS
		switch sn.End.Type {
		case runner.EventExit:
			code = sn.End.ExitCode
		case runner.EventTimeout:
			stderr = append(stderr, []byte(fmt.Sprintf("Execution timed out after %g seconds", sn.End.TimeoutSeconds))...)
		case runner.EventError:
			stderr = append(stderr, []byte("sandbox error: "+sn.End.ErrCode+": "+sn.End.Message)...)
		case runner.EventCancelled:
			stderr = append(stderr, []byte("Execution was cancelled")...)
		}
	}
	arts := []map[string]any{}
	if code == 0 {
		arts = s.artifactsSince(ss, before)
	}
	res["exit_code"] = code
	res["stdout"] = toValidUTF8(string(stdout))
	res["stderr"] = toValidUTF8(string(stderr))
	res["artifacts"] = arts
	res["duration_ms"] = dur
	return res
}

func pythonSummary(res map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code %v in %v ms (session %v, %v)", res["exit_code"], res["duration_ms"], res["session_id"], res["run_id"])
	if s := res["stdout"].(string); s != "" {
		fmt.Fprintf(&b, "\n--- stdout ---\n%s", s)
	}
	if s := res["stderr"].(string); s != "" {
		fmt.Fprintf(&b, "\n--- stderr ---\n%s", s)
	}
	if arts := res["artifacts"].([]map[string]any); len(arts) > 0 {
		b.WriteString("\n--- artifacts ---")
		for _, a := range arts {
			fmt.Fprintf(&b, "\n%v (%v, %v bytes)", a["path"], a["mime_type"], a["size_bytes"])
			if u, ok := a["download_url"]; ok {
				fmt.Fprintf(&b, " %v", u)
			}
		}
	}
	return b.String()
}

// artifactContent adds a resource_link per artifact and a small preview
// per image, so an agent can look without pulling whole files into its
// context.
func (s *Server) artifactContent(ss *sessions.Session, res map[string]any) []mcp.Content {
	var out []mcp.Content
	for _, a := range res["artifacts"].([]map[string]any) {
		name, mimeType := a["filename"].(string), a["mime_type"].(string)
		uri := "artifact://" + ss.ID + "/" + url.PathEscape(name)
		link := mcp.NewResourceLink(uri, name, fmt.Sprintf("%v bytes in %s", a["size_bytes"], a["path"]), mimeType)
		out = append(out, link)
		if strings.HasPrefix(mimeType, "image/") && mimeType != "image/svg+xml" {
			data, _, err := ss.ReadFile(name, 32<<20)
			if err == nil {
				if prev, err := preview(data, s.data.PreviewBytes); err == nil {
					out = append(out, mcp.NewImageContent(base64.StdEncoding.EncodeToString(prev), "image/png"))
				}
			}
		}
	}
	return out
}

// maxPreviewPixels bounds the images preview decodes: a file's header
// can claim any size (a 74-byte PNG can claim 10^12 pixels), and decoding
// allocates for what it claims.
const maxPreviewPixels = 40_000_000

// preview downscales an image to a PNG of at most max bytes. It reads the
// header first and decodes only images of a sane size.
func preview(data []byte, max int) ([]byte, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPreviewPixels {
		return nil, fmt.Errorf("%dx%d pixels: too large to preview", cfg.Width, cfg.Height)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	for side := 512; side >= 32; side /= 2 {
		w, h := b.Dx(), b.Dy()
		if w > side || h > side {
			if w >= h {
				h, w = h*side/w, side
			} else {
				w, h = w*side/h, side
			}
		}
		dst := image.NewRGBA(image.Rect(0, 0, max1(w), max1(h)))
		draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, draw.Over, nil)
		var buf bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, dst); err != nil {
			return nil, err
		}
		if buf.Len() <= max {
			return buf.Bytes(), nil
		}
	}
	return nil, errors.New("no preview small enough")
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func (s *Server) handleReadArtifact(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
		Path      string `json:"path"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	ss, err := s.data.Sessions.Get(a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	rel, err := sessions.CleanName(a.Path)
	if err != nil {
		s.audit(ss, map[string]any{"op": "read_artifact", "path": a.Path, "error": "invalid_path"})
		return fromErr(err), nil
	}
	data, info, err := ss.ReadFile(rel, s.data.MaxArtifactRead)
	if err != nil {
		var se *sessions.Error
		if errors.As(err, &se) {
			s.audit(ss, map[string]any{"op": "read_artifact", "path": a.Path, "error": se.Code})
		}
		if errors.As(err, &se) && se.Code == "artifact_too_large" {
			extra := map[string]any{"size_bytes": info.Size}
			if s.data.Files != nil {
				extra["download_url"] = s.data.Files.URL(ss.ID, info.Filename)
			}
			return dataError(se.Code, se.Message, extra), nil
		}
		return fromErr(err), nil
	}
	s.audit(ss, map[string]any{"op": "read_artifact", "path": info.Path, "size_bytes": info.Size})
	v := map[string]any{"path": info.Path, "filename": path.Base(info.Filename), "mime_type": info.MIME, "size_bytes": info.Size,
		"content_base64": base64.StdEncoding.EncodeToString(data)}
	return mcp.NewToolResultStructured(v, fmt.Sprintf("%s: %s, %d bytes (content_base64 in structuredContent)", info.Path, info.MIME, info.Size)), nil
}

func (s *Server) handleListArtifacts(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	ss, err := s.data.Sessions.Get(a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	arts := []map[string]any{}
	var lines []string
	for _, f := range ss.List() {
		arts = append(arts, s.artifactJSON(ss.ID, f))
		lines = append(lines, fmt.Sprintf("%s (%s, %d bytes)", f.Path, f.MIME, f.Size))
	}
	text := "no files in /mnt/data"
	if len(lines) > 0 {
		text = strings.Join(lines, "\n")
	}
	return mcp.NewToolResultStructured(map[string]any{"artifacts": arts}, text), nil
}

func (s *Server) handleCloseSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if err := s.data.Sessions.Close(a.SessionID); err != nil {
		return fromErr(err), nil
	}
	return mcp.NewToolResultStructured(map[string]any{"status": "closed"}, "session "+a.SessionID+" closed"), nil
}

func (s *Server) readArtifactResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	sid, name := argString(req.Params.Arguments["session_id"]), argString(req.Params.Arguments["filename"])
	if unescaped, err := url.PathUnescape(name); err == nil {
		name = unescaped
	}
	ss, err := s.data.Sessions.Get(sid)
	if err != nil {
		return nil, err
	}
	rel, err := sessions.CleanName(name)
	if err != nil {
		return nil, err
	}
	data, info, err := ss.ReadFile(rel, s.data.MaxArtifactRead)
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{mcp.BlobResourceContents{URI: req.Params.URI, MIMEType: info.MIME, Blob: base64.StdEncoding.EncodeToString(data)}}, nil
}

// argString reads a URI template variable (mcp-go passes []string).
func argString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []string:
		if len(x) > 0 {
			return x[0]
		}
	case []any:
		if len(x) > 0 {
			return fmt.Sprint(x[0])
		}
	}
	return ""
}
