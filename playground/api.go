package playground

// The playground's API, under /playground/api, beside its page: list the
// languages, run code in a conversation's session with the output
// streaming in (server-sent events), upload files, list the conversation's
// files. It takes the server's token as a Bearer token; every run goes
// through the run service.

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Mount adds the playground's page, assets and API to mux, every route
// behind g; auth checks the server's token on the API routes.
func Mount(mux *http.ServeMux, g *guard.Guard, svc *service.Service, auth func(http.ResponseWriter, *http.Request) (string, bool)) {
	a := &api{svc: svc}
	static := http.FileServerFS(Static())
	open := guard.Route{}
	mux.Handle("GET /static/", g.Wrap(open, http.StripPrefix("/static/", static)))
	mux.Handle("GET /{$}", g.Wrap(open, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
		http.ServeFileFS(w, r, Static(), "index.html")
	})))
	rt := guard.Route{Auth: auth}
	upload := guard.Route{Auth: auth, MaxBody: svc.Config().MaxUploadBytes + 1<<20}
	mux.Handle("GET /playground/api/runtimes", g.Wrap(rt, http.HandlerFunc(a.runtimes)))
	mux.Handle("POST /playground/api/run", g.Wrap(rt, http.HandlerFunc(a.run)))
	mux.Handle("POST /playground/api/upload", g.Wrap(upload, http.HandlerFunc(a.upload)))
	mux.Handle("GET /playground/api/files", g.Wrap(rt, http.HandlerFunc(a.files)))
}

type api struct{ svc *service.Service }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": msg})
}

// writeErr replies with a service error: its code and message, and the
// HTTP status that fits it.
func writeErr(w http.ResponseWriter, err error) {
	code, msg := service.CodeOf(err)
	status := http.StatusBadRequest
	switch code {
	case "session_busy":
		status = http.StatusConflict
	case "max_sessions", "too_many_executions":
		status = http.StatusServiceUnavailable
	case "quota_exceeded", "too_large", "code_too_large":
		status = http.StatusRequestEntityTooLarge
	case "internal_error", "storage_full":
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]any{"error": msg, "code": code})
}

func (a *api) runtimes(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, rt := range a.svc.Runtimes().All() {
		if ok, _ := a.svc.Available(rt); ok {
			out = append(out, map[string]any{"language": rt.Language, "version": rt.Found})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"runtimes": out})
}

// session is the conversation's session; its caller is whoever holds the
// key, from where.
func (a *api) session(w http.ResponseWriter, r *http.Request, conversation string) *sessions.Session {
	if strings.TrimSpace(conversation) == "" {
		writeError(w, http.StatusBadRequest, "give a conversation id")
		return nil
	}
	ss, _, err := a.svc.Session(guard.CallerKey(r, "playground"), sessions.ForConversation(conversation))
	if err != nil {
		writeErr(w, err)
		return nil
	}
	return ss
}

func (a *api) fileList(ss *sessions.Session) []map[string]any {
	files := []map[string]any{}
	signer := a.svc.Config().Files
	for _, f := range ss.List() {
		v := map[string]any{"path": f.Path, "filename": f.Filename, "name": f.Filename, "size_bytes": f.Size, "mime_type": f.MIME}
		if signer != nil {
			u := signer.URL(ss.ID, f.Filename)
			v["download_url"], v["url"] = u, u
		}
		files = append(files, v)
	}
	return files
}

func (a *api) files(w http.ResponseWriter, r *http.Request) {
	ss := a.session(w, r, r.URL.Query().Get("conversation"))
	if ss == nil {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": a.fileList(ss)})
}

func (a *api) upload(w http.ResponseWriter, r *http.Request) {
	ss := a.session(w, r, r.URL.Query().Get("conversation"))
	if ss == nil {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "want multipart/form-data: "+err.Error())
		return
	}
	max := a.svc.Config().MaxUploadBytes
	var names []string
	budget := sessions.UploadBudget{MaxTotal: max}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err := budget.Part(params["filename"] != ""); err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		}
		if params["filename"] == "" {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(part, max+1))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if int64(len(data)) > max {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is larger than %d bytes", params["filename"], max))
			return
		}
		if err := budget.File(len(data)); err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		}
		rel, err := sessions.CleanName(params["filename"])
		if err == nil {
			_, err = a.svc.WriteFile(ss, rel, data, true)
		}
		if err != nil {
			writeErr(w, err)
			return
		}
		names = append(names, rel)
	}
	writeJSON(w, http.StatusOK, map[string]any{"uploaded": names, "files": a.fileList(ss)})
}

// run streams a run as server-sent events: stdout, stderr and file
// events as they come, then done with the exit code and the
// conversation's files.
func (a *api) run(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Language     string `json:"language"`
		Code         string `json:"code"`
		Conversation string `json:"conversation"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Language) == "" {
		writeError(w, http.StatusBadRequest, "choose a language (the list comes from /playground/api/runtimes)")
		return
	}
	rt, err := a.svc.Runtime(req.Language)
	if err != nil {
		writeErr(w, err)
		return
	}
	ss := a.session(w, r, req.Conversation)
	if ss == nil {
		return
	}
	run, err := a.svc.Start(r.Context(), service.Request{Op: "playground.run", Kind: "playground", Session: ss, Language: rt.Language, Code: req.Code,
		Label: "playground " + rt.Language})
	if err != nil {
		writeErr(w, err)
		return
	}
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
		sn := run.Exec.Wait(r.Context(), after, false)
		for _, ev := range sn.Events {
			switch {
			case ev.Type == runner.EventStdout || ev.Type == runner.EventStderr:
				send(ev.Type, map[string]any{"data": service.ValidUTF8(string(ev.Data))})
			case ev.Type == runner.EventFile && ev.File != nil:
				send("file", ev.File)
			}
		}
		after = sn.NextSeq
		if r.Context().Err() != nil || sn.End != nil {
			break
		}
	}
	res := run.Wait(r.Context()) // a page that went away: the run is stopped
	if r.Context().Err() != nil {
		return
	}
	code := -1
	if c := res.ExitCode(); c != nil {
		code = *c
	}
	msg := res.Explain(rt.Language)
	send("done", map[string]any{"exit_code": code, "message": msg, "duration_ms": res.Duration(), "files": a.fileList(ss), "session_id": ss.ID})
}
