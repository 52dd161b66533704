package playground

// The playground's API, under /playground/api, beside its page: list the
// languages, run code in a conversation's workspace with the output
// streaming in (server-sent events), upload files, list the
// conversation's files. It takes the server's keys as Bearer tokens; a
// conversation is a name in the caller's own namespace (the service's
// ConversationWorkspace): another key naming the same conversation reaches
// another workspace. Listing never creates one: a GET changes nothing.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/service"
)

// door names the playground's conversations' namespace.
const door = "playground"

// Mount adds the playground's page, assets and API to mux, every route
// behind g; auth checks the server's keys on the API routes.
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

// writeErr replies with an error: its code, its message, and the HTTP
// status that fits it.
func writeErr(w http.ResponseWriter, err error) {
	e := errs.Of(err)
	writeJSON(w, e.Status(), map[string]any{"error": e.Detail(), "code": e.Code})
}

func caller(r *http.Request) service.Caller {
	return service.CallerOf(guard.Principal(r.Context()), r.RemoteAddr)
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

// workspace is the conversation's workspace, made when create is set (nil
// without an error when there is none yet).
func (a *api) workspace(r *http.Request, conversation string, create bool) (*service.Workspace, error) {
	if strings.TrimSpace(conversation) == "" {
		return nil, errs.OnField(errs.InvalidArguments, "conversation", "", "is empty; give a conversation id")
	}
	return a.svc.ConversationWorkspace(caller(r), door, conversation, create)
}

// fileList is a listing as the page shows it (it takes Files' "more" too,
// which the files route reports beside it).
func fileList(files []service.File, _ int) []map[string]any {
	out := []map[string]any{}
	for _, f := range files {
		v := map[string]any{"path": f.Path, "filename": f.Name, "name": f.Name, "size_bytes": f.Size, "mime_type": f.MIME}
		if f.URL != "" {
			v["download_url"], v["url"] = f.URL, f.URL
		}
		out = append(out, v)
	}
	return out
}

func (a *api) files(w http.ResponseWriter, r *http.Request) {
	ws, err := a.workspace(r, r.URL.Query().Get("conversation"), false)
	if err != nil {
		writeErr(w, err)
		return
	}
	v := map[string]any{"files": []any{}}
	if ws != nil {
		files, more := a.svc.Files(caller(r), ws, "playground.files")
		v["files"], v["more"] = fileList(files, more), more
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *api) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeErr(w, errs.New(errs.InvalidArguments, "want multipart/form-data: %v", err))
		return
	}
	ws, err := a.workspace(r, r.URL.Query().Get("conversation"), true)
	if err != nil {
		writeErr(w, err)
		return
	}
	rep, err := a.svc.UploadForm(caller(r), ws, mr, service.UploadOptions{Op: "playground.upload", Overwrite: true})
	if err != nil {
		writeErr(w, err)
		return
	}
	names := []string{}
	for _, f := range rep.Files {
		names = append(names, strings.TrimPrefix(f.Path, service.WorkspaceMount+"/"))
	}
	writeJSON(w, http.StatusOK, map[string]any{"uploaded": names, "files": fileList(a.svc.Files(caller(r), ws, "playground.files"))})
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
		writeErr(w, errs.New(errs.InvalidArguments, "invalid JSON: %v", err))
		return
	}
	if strings.TrimSpace(req.Language) == "" {
		writeErr(w, errs.OnField(errs.InvalidArguments, "language", "", "is empty; choose one (the list comes from /playground/api/runtimes)"))
		return
	}
	rt, err := a.svc.Runtime(req.Language)
	if err != nil {
		writeErr(w, err)
		return
	}
	ws, err := a.workspace(r, req.Conversation, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	c := caller(r)
	run, err := a.svc.Start(r.Context(), service.Request{Op: "playground.run", Kind: "playground", Caller: c, Workspace: ws,
		Language: rt.Language, Code: req.Code, Label: "playground " + rt.Language})
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
			case ev.Type == service.EventStdout || ev.Type == service.EventStderr:
				send(ev.Type, map[string]any{"data": service.ValidUTF8(string(ev.Data))})
			case ev.Type == service.EventFile && ev.File != nil:
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
	send("done", map[string]any{"exit_code": code, "message": msg, "duration_ms": res.Duration(),
		"files": fileList(a.svc.Files(c, ws, "playground.files")), "session_id": ws.ID()})
}
