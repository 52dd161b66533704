package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decoders for previews
	_ "image/jpeg"
	"image/png"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/image/draw"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/service"
)

// addDataTools adds seed 000's data-session tools.
func (s *Server) addDataTools() {
	s.add("upload_file", s.handleUpload)
	s.add("run_python", s.handleRunPython)
	s.add("read_artifact", s.handleReadArtifact)
	s.add("list_artifacts", s.handleListArtifacts)
	s.add("close_session", s.handleCloseSession)
	if s.tools["read_artifact"] { // the same reading, by another door
		s.mcp.AddResourceTemplate(mcp.NewResourceTemplate("artifact://{session_id}/{filename}", "artifact",
			mcp.WithTemplateDescription("A file in a session's /mnt/data")), s.readArtifactResource)
	}
}

// dataError is seed 000's error shape: {"error": code, "message": ...}.
func dataError(code, msg string, extra map[string]any) *mcp.CallToolResult {
	v := map[string]any{"error": code, "message": msg}
	for k, x := range extra {
		v[k] = x
	}
	return reply(v, true)
}

// fromErr is seed 000's error reply for any error of the service.
func fromErr(err error) *mcp.CallToolResult {
	code, msg := service.CodeOf(err)
	return dataError(code, msg, nil)
}

func artifactJSON(f service.File) map[string]any {
	v := map[string]any{"path": f.Path, "filename": f.Name, "size_bytes": f.Size, "mime_type": f.MIME}
	if f.URL != "" {
		v["download_url"] = f.URL
	}
	return v
}

// artifactList is seed 000's artifact objects for files.
func artifactList(files []service.File) []map[string]any {
	arts := []map[string]any{}
	for _, f := range files {
		arts = append(arts, artifactJSON(f))
	}
	return arts
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
	if err := service.CheckName(a.Filename); err != nil {
		return fromErr(err), nil
	}
	if int64(base64.StdEncoding.DecodedLen(len(a.Content))) > s.svc.Config().MaxUploadBytes+3 {
		return dataError("too_large", fmt.Sprintf("the upload is larger than the %d-byte limit (SANDBOX_MAX_UPLOAD_BYTES)", s.svc.Config().MaxUploadBytes), nil), nil
	}
	data, err := base64.StdEncoding.DecodeString(a.Content)
	if err != nil {
		return dataError("invalid_arguments", "content_base64 is not valid base64: "+err.Error(), nil), nil
	}
	if int64(len(data)) > s.svc.Config().MaxUploadBytes {
		return dataError("too_large", fmt.Sprintf("the upload is %d bytes, more than the %d-byte limit (SANDBOX_MAX_UPLOAD_BYTES)", len(data), s.svc.Config().MaxUploadBytes), nil), nil
	}
	c := callerOf(ctx)
	ws, created, err := s.svc.OpenWorkspace(c, a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	p, err := s.svc.WriteFile(c, ws, "upload_file", a.Filename, data, a.Overwrite)
	if err != nil {
		if created {
			// A session the caller never got the name of would linger
			// until its idle TTL and count against max_sessions.
			_ = s.svc.CloseWorkspace(c, ws.ID())
		}
		return fromErr(err), nil
	}
	v := map[string]any{"session_id": ws.ID(), "path": p}
	return reply(v, false), nil
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
	if err := s.svc.CheckCode(a.Code); err != nil {
		return fromErr(err), nil
	}
	c := callerOf(ctx)
	ws, _, err := s.svc.OpenWorkspace(c, a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	runID := newRunID()
	python := s.svc.Config().Python
	r, err := s.svc.Start(ctx, service.Request{Op: "run_python", Kind: "run_python", Caller: c, Workspace: ws, Label: "run_python",
		Argv: []string{python, "-c", a.Code}, Audit: map[string]any{"run_id": runID}})
	if err != nil {
		return fromErr(err), nil
	}
	s.taskStarted(ctx, r) // a task-augmented call is answered now (tasks.go)
	res := r.Wait(ctx)
	if end := res.End; end != nil && end.Type == service.EventError {
		// The sandbox could not run the code at all: say why, not a fake exit code.
		s.cfg.Logger.Warn("run_python", "session_id", ws.ID(), "run_id", runID, "error", end.ErrCode, "message", end.Message)
		msg := end.Message
		if end.ErrCode == service.ErrCodeNotFound || end.ErrCode == service.ErrCodeNotExecutable {
			msg = fmt.Sprintf("the Python interpreter %s is missing on this host (%s); the operator installs the data profile with: apt-get install -y %s",
				python, msg, strings.Join(dataPackages, " "))
		}
		return dataError(end.ErrCode, msg, map[string]any{"session_id": ws.ID(), "run_id": runID}), nil
	}
	shown := s.shownFiles(res.Artifacts)
	v := runResult(ws.ID(), runID, res, shown, s.cfg.ReplyChars)
	if res.QuotaExceeded != "" {
		return dataError("quota_exceeded", res.QuotaExceeded, v), nil
	}
	if h := missingModuleHint(res.Stderr); h != "" {
		v["hint"] = h
	}
	s.cfg.Logger.Info("run_python", "session_id", ws.ID(), "run_id", runID, "duration_ms", v["duration_ms"], "exit_code", v["exit_code"])
	out := reply(v, false)
	out.Content = append(out.Content, s.artifactContent(ctx, ws, shown)...)
	return out, nil
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

// runResult is seed 000's run_python response: exit_code is the
// program's, -1 for a timeout, 128+N for a run cancelled by signal N.
func runResult(sessionID, runID string, res service.Result, shown []service.File, replyChars int) map[string]any {
	trunc := map[string]bool{}
	for _, t := range res.Truncated {
		trunc[t] = true
	}
	code := -1
	if c := res.ExitCode(); c != nil {
		code = *c
	}
	out := clipStreams(res.Stdout, res.StderrWithEnd("python"), replyChars)
	v := map[string]any{"session_id": sessionID, "run_id": runID, "exit_code": code,
		"stdout": out.stdout, "stderr": out.stderr,
		"stdout_truncated": trunc["stdout"] || out.stdoutCut, "stderr_truncated": trunc["stderr"] || out.stderrCut,
		"artifacts": artifactList(shown), "duration_ms": res.Duration()}
	if out.note != "" {
		v["cut"] = out.note + "write long output to a file in /mnt/data and read it with read_artifact"
	}
	if more := res.MoreFiles + len(res.Artifacts) - len(shown); res.OK() && more > 0 {
		v["more_artifacts"] = more // past what one reply lists; list_artifacts has them
	}
	return v
}

// artifactContent adds a resource_link per artifact and a small preview
// per image, so an agent can look without pulling whole files into its
// context.
func (s *Server) artifactContent(ctx context.Context, ws *service.Workspace, arts []service.File) []mcp.Content {
	var out []mcp.Content
	budget := newPreviewBudget()
	for _, a := range arts {
		if !a.Fetchable {
			continue // no tool can read it back by its name
		}
		if s.tools["read_artifact"] {
			uri := "artifact://" + ws.ID() + "/" + url.PathEscape(a.Name)
			out = append(out, mcp.NewResourceLink(uri, a.Name, fmt.Sprintf("%v bytes in %s", a.Size, a.Path), a.MIME))
		}
		if strings.HasPrefix(a.MIME, "image/") && a.MIME != "image/svg+xml" {
			data, _, err := s.svc.ReadFile(callerOf(ctx), ws, "preview", a.Name, 32<<20)
			if err == nil {
				if prev, err := preview(data, s.cfg.PreviewBytes, budget); err == nil {
					out = append(out, mcp.NewImageContent(base64.StdEncoding.EncodeToString(prev), "image/png"))
				}
			}
		}
	}
	return out
}

// Previews decode images a sandbox made: a file's header can claim any
// size (a 74-byte PNG can claim 10^12 pixels, a 300 KB one 40 Mpixels of
// 16-bit colour, 320 MB decoded), and decoding costs what it claims. So
// an image is decoded only when its header shows at most maxPreviewPixels
// and maxPreviewDecoded bytes, and one reply decodes at most
// maxPreviewsPerReply images and maxPreviewDecodedPerReply bytes in all.
const (
	maxPreviewPixels          = 40_000_000
	maxPreviewDecoded         = 64 << 20
	maxPreviewsPerReply       = 8
	maxPreviewDecodedPerReply = 128 << 20
)

// previewBudget is what one reply's previews may still decode.
type previewBudget struct {
	images  int
	decoded int64
}

func newPreviewBudget() *previewBudget {
	return &previewBudget{images: maxPreviewsPerReply, decoded: maxPreviewDecodedPerReply}
}

// decodedBytes is what decoding an image of cfg allocates.
func decodedBytes(cfg image.Config) int64 {
	bpp := int64(4)
	switch cfg.ColorModel {
	case color.RGBA64Model, color.NRGBA64Model:
		bpp = 8
	case color.Gray16Model:
		bpp = 2
	case color.GrayModel, color.AlphaModel:
		bpp = 1
	}
	return int64(cfg.Width) * int64(cfg.Height) * bpp
}

// preview downscales an image to a PNG of at most max bytes. It reads the
// header first and decodes only an image of a sane size that the reply's
// budget still covers.
func preview(data []byte, max int, budget *previewBudget) ([]byte, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPreviewPixels || decodedBytes(cfg) > maxPreviewDecoded {
		return nil, fmt.Errorf("%dx%d pixels: too large to preview", cfg.Width, cfg.Height)
	}
	if budget.images <= 0 || decodedBytes(cfg) > budget.decoded {
		return nil, errors.New("this reply's previews are spent")
	}
	budget.images--
	budget.decoded -= decodedBytes(cfg)
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
	c := callerOf(ctx)
	ws, err := s.svc.LookupWorkspace(c, a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	data, info, err := s.svc.ReadFile(c, ws, "read_artifact", a.Path, 0)
	if err != nil {
		if e := errs.Of(err); e.Code == errs.ArtifactTooLarge {
			extra := map[string]any{"size_bytes": info.Size}
			if info.URL != "" {
				extra["download_url"] = info.URL
			}
			return dataError(e.Code, e.Message, extra), nil
		}
		return fromErr(err), nil
	}
	v := map[string]any{"path": info.Path, "filename": path.Base(info.Name), "mime_type": info.MIME, "size_bytes": info.Size,
		"content_base64": base64.StdEncoding.EncodeToString(data)}
	return reply(v, false), nil
}

func (s *Server) handleListArtifacts(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	c := callerOf(ctx)
	ws, err := s.svc.LookupWorkspace(c, a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	arts := []map[string]any{}
	files, more := s.svc.Files(c, ws, "list_artifacts")
	for _, f := range files {
		arts = append(arts, artifactJSON(f))
	}
	v := map[string]any{"artifacts": arts}
	if more > 0 {
		v["more"] = more
		v["note"] = fmt.Sprintf("%d more files are not listed; list them from the sandbox, e.g. execute_code with ls", more)
	}
	return reply(v, false), nil
}

func (s *Server) handleCloseSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if err := s.svc.CloseWorkspace(callerOf(ctx), a.SessionID); err != nil {
		return fromErr(err), nil
	}
	return reply(map[string]any{"status": "closed"}, false), nil
}

func (s *Server) readArtifactResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	sid, name := argString(req.Params.Arguments["session_id"]), argString(req.Params.Arguments["filename"])
	if unescaped, err := url.PathUnescape(name); err == nil {
		name = unescaped
	}
	c := callerOf(ctx)
	ws, err := s.svc.LookupWorkspace(c, sid)
	if err != nil {
		return nil, err
	}
	data, info, err := s.svc.ReadFile(c, ws, "resources/read", name, 0)
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
