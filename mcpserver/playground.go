package mcpserver

// The web playground at / (seed 003's bonus): pick a language, type code,
// run it in a conversation's sandbox with the output streaming in (server-
// sent events), upload files, and see and download the conversation's
// files. Assets are embedded (package playground); its small API lives
// under /playground/api and takes the server's token as a Bearer token.

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/playground"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

func (s *Server) playgroundRoutes(mux *http.ServeMux, g *guard.Guard, auth func(http.ResponseWriter, *http.Request) (string, bool)) {
	static := http.FileServerFS(playground.Static())
	open := guard.Route{}
	mux.Handle("GET /static/", g.Wrap(open, http.StripPrefix("/static/", static)))
	mux.Handle("GET /{$}", g.Wrap(open, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
		http.ServeFileFS(w, r, playground.Static(), "index.html")
	})))
	api := guard.Route{Auth: auth}
	upload := guard.Route{Auth: auth, MaxBody: s.data.MaxUploadBytes + 1<<20}
	mux.Handle("GET /playground/api/runtimes", g.Wrap(api, http.HandlerFunc(s.pgRuntimes)))
	mux.Handle("POST /playground/api/run", g.Wrap(api, http.HandlerFunc(s.pgRun)))
	mux.Handle("POST /playground/api/upload", g.Wrap(upload, http.HandlerFunc(s.pgUpload)))
	mux.Handle("GET /playground/api/files", g.Wrap(api, http.HandlerFunc(s.pgFiles)))
}

func (s *Server) pgRuntimes(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, rt := range s.runtimes().All() {
		if s.runtimeAvailable(rt) {
			out = append(out, map[string]any{"language": rt.Language, "version": rt.Found})
		}
	}
	lcJSON(w, http.StatusOK, map[string]any{"runtimes": out})
}

func (s *Server) pgSession(w http.ResponseWriter, conversation string) *sessions.Session {
	if strings.TrimSpace(conversation) == "" {
		lcError(w, http.StatusBadRequest, "give a conversation id")
		return nil
	}
	ss, _, err := s.data.Sessions.GetOrCreate(ConversationSession(conversation))
	if err != nil {
		lcError(w, http.StatusServiceUnavailable, err.Error())
		return nil
	}
	return ss
}

func (s *Server) pgFileList(ss *sessions.Session) []map[string]any {
	files := []map[string]any{}
	for _, f := range ss.List() {
		v := s.artifactJSON(ss.ID, f)
		v["name"], v["url"] = f.Filename, v["download_url"]
		files = append(files, v)
	}
	return files
}

func (s *Server) pgFiles(w http.ResponseWriter, r *http.Request) {
	ss := s.pgSession(w, r.URL.Query().Get("conversation"))
	if ss == nil {
		return
	}
	lcJSON(w, http.StatusOK, map[string]any{"files": s.pgFileList(ss)})
}

func (s *Server) pgUpload(w http.ResponseWriter, r *http.Request) {
	ss := s.pgSession(w, r.URL.Query().Get("conversation"))
	if ss == nil {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		lcError(w, http.StatusBadRequest, "want multipart/form-data: "+err.Error())
		return
	}
	var names []string
	budget := uploadBudget{maxTotal: s.data.MaxUploadBytes}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			lcError(w, http.StatusBadRequest, err.Error())
			return
		}
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err := budget.part(params["filename"] != ""); err != nil {
			lcError(w, statusTooLarge, err.Error())
			return
		}
		if params["filename"] == "" {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(part, s.data.MaxUploadBytes+1))
		if err != nil {
			lcError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := budget.file(len(data)); err != nil {
			lcError(w, statusTooLarge, err.Error())
			return
		}
		if int64(len(data)) > s.data.MaxUploadBytes {
			lcError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is larger than %d bytes", params["filename"], s.data.MaxUploadBytes))
			return
		}
		rel, err := sessions.CleanName(params["filename"])
		if err == nil {
			_, err = ss.WriteFile(rel, data, true)
		}
		if err != nil {
			lcError(w, http.StatusBadRequest, err.Error())
			return
		}
		names = append(names, rel)
	}
	lcJSON(w, http.StatusOK, map[string]any{"uploaded": names, "files": s.pgFileList(ss)})
}

// pgRun streams a run as server-sent events: stdout and stderr as they
// come, then done with the exit code and the conversation's files.
func (s *Server) pgRun(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Language     string `json:"language"`
		Code         string `json:"code"`
		Conversation string `json:"conversation"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		lcError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	rt, ok := s.runtimes().Get(req.Language)
	if !ok || !s.runtimeAvailable(rt) {
		lcError(w, http.StatusBadRequest, "unsupported language: "+req.Language)
		return
	}
	if len(req.Code) > s.data.MaxCodeBytes {
		lcError(w, http.StatusRequestEntityTooLarge, "the code is too long")
		return
	}
	ss := s.pgSession(w, req.Conversation)
	if ss == nil {
		return
	}
	if err := ss.Acquire(); err != nil {
		lcError(w, http.StatusConflict, err.Error())
		return
	}
	defer ss.Release()
	e, err := s.mgr.StartWith(dataOwner(ss.ID), "playground "+rt.Language, s.scriptSpec(ss, rt, req.Code, s.data.ExecTimeout), s.starter(ss))
	if err != nil {
		lcError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.observe("playground", rt.Language, e)
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	send := func(ev string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	var after uint64
	for {
		sn := e.Wait(r.Context(), after, false)
		for _, ev := range sn.Events {
			if ev.Type == runner.EventStdout || ev.Type == runner.EventStderr {
				send(ev.Type, map[string]any{"data": toValidUTF8(string(ev.Data))})
			}
		}
		after = sn.NextSeq
		if r.Context().Err() != nil {
			_ = e.Cancel(true)
			return
		}
		if sn.End != nil {
			code, msg := -1, ""
			switch sn.End.Type {
			case runner.EventExit:
				code = sn.End.ExitCode
				if rt.CompileFailed(code) {
					msg = "compilation failed"
				}
			case runner.EventTimeout:
				msg = fmt.Sprintf("timed out after %g seconds", sn.End.TimeoutSeconds)
			default:
				msg = strings.TrimSpace(sn.End.Type + " " + sn.End.ErrCode + " " + sn.End.Message)
			}
			send("done", map[string]any{"exit_code": code, "message": msg, "duration_ms": sn.End.DurationMS, "files": s.pgFileList(ss)})
			return
		}
	}
}
