// Package librechat is srt-mcp's LibreChat-compatible Code API (what LibreChat's execute_code tool and
// file helpers call; see the wire contract in the project notes): POST
// exec, POST upload, POST upload/batch, GET download/{sid}/{fid}, GET
// files/{sid}, GET sessions/{sid}/objects/{fid}, DELETE files/{sid}/{fid},
// GET health, under a configurable prefix. Both client generations work:
// legacy (X-API-Key; file refs {id, session_id, name}) and current (Bearer
// JWT or nothing; refs {id, storage_session_id, name, kind}).
//
// Every upload and every exec gets a storage session of its own (a data
// session that lasts a day), bound to the LibreChat principal that made it
// (the API key's holder, or a JWT's subject): another principal, through
// this door or any other, finds none of it. An exec copies its input files
// in (from the caller's own storage sessions only), runs the code with
// /mnt/data as its working directory, and lists the files it created or
// changed under its own session id, where download and the listings find
// them. Request bodies are never logged: legacy clients put their API key
// in them. Every run and every file operation goes through the service.
package librechat

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/service"
)

// Config configures the Code API.
type Config struct {
	Prefix string // mount point, e.g. "/v1/librechat"
	APIKey string // X-API-Key (legacy clients); "" disables the key
	// JWTKeys verify Bearer tokens (current clients): EdDSA or RS256,
	// audience "codeapi".
	JWTKeys []crypto.PublicKey
	// NoAuth accepts requests without credentials (a default current
	// LibreChat sends none); the CLI allows it only when asked for.
	NoAuth bool
	// RateScale multiplies the default rate limits (20 exec / 30 s, 30
	// uploads / 5 min, 60 downloads / min, 120 listings / min); 0: 1.
	RateScale float64
	TTL       time.Duration // how long stored files last idle (default 24 h)
	MaxStored int           // stored sessions at most (default 1000)
	// MaxStoredPerCaller bounds one principal's stored sessions (default a
	// quarter of MaxStored): past it, its least recently used one makes
	// room, so no principal takes every place.
	MaxStoredPerCaller int
}

type lcFile struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"` // relative to /mnt/data
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	Type     string    `json:"content_type"`
	Kind     string    `json:"kind,omitempty"`
	Entity   string    `json:"entity_id,omitempty"`
}

type librechat struct {
	svc *service.Service
	cfg Config
	mu  sync.Mutex      // index files
	rl  *guard.Limiters // by principal and class, bounded like the guard's
}

// maxLimiters bounds the rate limiters kept (the guard's bound): with
// NoAuth every client address is a caller of its own.
const maxLimiters = 10000

// indexKey names a storage session's file index among its metadata.
const indexKey = "librechat-index"

const lcIDChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

// lcID is a 21-character id like codeapi's nanoids (no "." or "/").
func lcID() string {
	b := make([]byte, 21)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = lcIDChars[int(b[i])%len(lcIDChars)]
	}
	return string(b)
}

// New serves the Code API (mounted under its prefix by the command).
func New(cfg Config, svc *service.Service) http.Handler {
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.MaxStored <= 0 {
		cfg.MaxStored = 1000
	}
	if cfg.MaxStoredPerCaller <= 0 {
		cfg.MaxStoredPerCaller = max(1, cfg.MaxStored/4)
	}
	if cfg.RateScale <= 0 {
		cfg.RateScale = 1
	}
	lc := &librechat{svc: svc, cfg: cfg, rl: guard.NewLimiters(maxLimiters)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exec", lc.auth("exec", lc.exec))
	mux.HandleFunc("POST /upload", lc.auth("upload", lc.upload(false)))
	mux.HandleFunc("POST /upload/batch", lc.auth("upload", lc.upload(true)))
	mux.HandleFunc("GET /download/{sid}/{fid}", lc.auth("download", lc.download))
	mux.HandleFunc("GET /files/{sid}", lc.auth("list", lc.list))
	mux.HandleFunc("DELETE /files/{sid}/{fid}", lc.auth("list", lc.remove))
	mux.HandleFunc("GET /sessions/{sid}/objects/{fid}", lc.auth("list", lc.object))
	mux.HandleFunc("GET /health", lc.health)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		lcError(w, http.StatusNotFound, "no such route: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func lcError(w http.ResponseWriter, code int, msg string, extra ...any) {
	v := map[string]any{"error": msg}
	for i := 0; i+1 < len(extra); i += 2 {
		v[extra[i].(string)] = extra[i+1]
	}
	lcJSON(w, code, v)
}

// lcFail replies with an error of the service the way every door does:
// the HTTP status of its code, its message, and the code itself
// (quota_exceeded, session_busy, ...: what MCP's tools and the playground
// report for the same failure), after extra's fields.
func lcFail(w http.ResponseWriter, err error, extra ...any) {
	e := errs.Of(err)
	lcFailAs(w, e, e.Detail(), extra...)
}

// lcFailAs is lcFail with a message of the wire contract's own (codeapi's
// "File size limit exceeded").
func lcFailAs(w http.ResponseWriter, e *errs.Error, msg string, extra ...any) {
	lcError(w, e.Status(), msg, append([]any{"code", e.Code}, extra...)...)
}

func lcJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// auth checks the credentials (X-API-Key, Bearer JWT, or none when so
// configured), then the rate limit of the route's class.
func (lc *librechat) auth(class string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		principal, err := lc.principal(r)
		if err != nil {
			lcError(w, http.StatusUnauthorized, err.Error())
			return
		}
		r = r.WithContext(guard.WithPrincipal(r.Context(), "librechat:"+principal))
		key := principal
		if principal == "anonymous" {
			key = guard.CallerKey(r, principal) // anonymous callers do not share one bucket
		}
		if wait := lc.limit(key, class); wait > 0 {
			secs := int(wait.Seconds() + 0.999)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			lcError(w, http.StatusTooManyRequests, "rate_limited", "retry_after_seconds", secs)
			return
		}
		next(w, r)
	}
}

func (lc *librechat) principal(r *http.Request) (string, error) {
	if k := r.Header.Get("X-API-Key"); k != "" {
		if lc.cfg.APIKey == "" || subtle.ConstantTimeCompare([]byte(k), []byte(lc.cfg.APIKey)) != 1 {
			return "", errors.New("invalid API key")
		}
		return "apikey", nil
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		if len(lc.cfg.JWTKeys) == 0 {
			return "", errors.New("bearer tokens are not configured on this server (--librechat-jwt-public-key)")
		}
		tok := strings.TrimPrefix(h, "Bearer ")
		var lastErr error
		for _, key := range lc.cfg.JWTKeys {
			claims := jwt.RegisteredClaims{}
			_, err := jwt.ParseWithClaims(tok, &claims, func(t *jwt.Token) (any, error) {
				switch key.(type) {
				case ed25519.PublicKey:
					if _, ok := t.Method.(*jwt.SigningMethodEd25519); !ok {
						return nil, fmt.Errorf("alg %s does not match the EdDSA key", t.Method.Alg())
					}
				case *rsa.PublicKey:
					if t.Method.Alg() != "RS256" {
						return nil, fmt.Errorf("alg %s does not match the RS256 key", t.Method.Alg())
					}
				}
				return key, nil
			}, jwt.WithAudience("codeapi"), jwt.WithExpirationRequired(), jwt.WithLeeway(30*time.Second),
				jwt.WithValidMethods([]string{"EdDSA", "RS256"}))
			if err == nil && claims.Subject == "" {
				// A subject names whose files these are: tokens without
				// one would all share the same.
				return "", errors.New("invalid token: it names no subject (sub)")
			}
			if err == nil {
				return "jwt:" + claims.Subject, nil
			}
			lastErr = err
		}
		return "", fmt.Errorf("invalid token: %v", lastErr)
	}
	if lc.cfg.NoAuth {
		return "anonymous", nil
	}
	return "", errors.New("credentials required: X-API-Key or Authorization: Bearer <JWT>")
}

// limit returns how long to wait when the principal is over its rate for
// a class of routes, or 0.
func (lc *librechat) limit(principal, class string) time.Duration {
	per := map[string]struct {
		n      int
		window time.Duration
	}{"exec": {20, 30 * time.Second}, "upload": {30, 5 * time.Minute}, "download": {60, time.Minute}, "list": {120, time.Minute}}[class]
	n := max(int(float64(per.n)*lc.cfg.RateScale), 1)
	return lc.rl.Delay(principal+"\x00"+class, per.window/time.Duration(n), n)
}

func (lc *librechat) health(w http.ResponseWriter, r *http.Request) {
	lcJSON(w, http.StatusOK, map[string]any{"status": "ok", "languages": lc.svc.Languages(), "running": lc.svc.Stats().Running})
}

// caller is the LibreChat principal of a request auth let through.
func caller(r *http.Request) service.Caller {
	return service.CallerOf(guard.Principal(r.Context()), r.RemoteAddr)
}

// index: the files of a storage session, by id, kept beside the workspace
// (code never sees or changes it).
func (lc *librechat) readIndex(ws *service.Workspace) map[string]lcFile {
	idx := map[string]lcFile{}
	_ = lc.svc.Meta(ws, indexKey, &idx)
	return idx
}

func (lc *librechat) writeIndex(ws *service.Workspace, idx map[string]lcFile) error {
	return lc.svc.SetMeta(ws, indexKey, idx)
}

// session is the caller's storage session sid (404 for one that does not
// exist or is another principal's).
func (lc *librechat) session(w http.ResponseWriter, r *http.Request, sid string) *service.Workspace {
	ws, err := lc.svc.LookupWorkspace(caller(r), sid)
	if err != nil {
		lcError(w, http.StatusNotFound, "Session not found", "details", "The session may have expired or does not exist")
		return nil
	}
	return ws
}

// newStorage is a fresh storage session of the caller's.
func (lc *librechat) newStorage(w http.ResponseWriter, r *http.Request) *service.Workspace {
	ws, err := lc.svc.NewStorage(caller(r), lc.cfg.TTL, lc.cfg.MaxStored, lc.cfg.MaxStoredPerCaller)
	if err != nil {
		lcFail(w, err)
		return nil
	}
	return ws
}

type lcRef struct {
	ID               string `json:"id"`
	SessionID        string `json:"session_id"`
	StorageSessionID string `json:"storage_session_id"`
	Name             string `json:"name"`
}

func (lc *librechat) exec(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Lang      string  `json:"lang"`
		Code      string  `json:"code"`
		Files     []lcRef `json:"files"`
		SessionID string  `json:"session_id"`
	}
	r.Body = http.MaxBytesReader(w, r.Body, 50<<20)
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		lcError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	rt, err := lc.svc.Runtime(req.Lang)
	if err != nil {
		lcError(w, http.StatusBadRequest, "Unsupported language: "+req.Lang, "languages", lc.svc.Languages())
		return
	}
	if err := lc.svc.CheckCode(req.Code); err != nil {
		lcFail(w, err)
		return
	}
	c := caller(r)
	ss := lc.newStorage(w, r)
	if ss == nil {
		return
	}
	// Inputs: the referenced files (and, for LibreChat's own helpers, the
	// files of the session it names) are copied in under their names, from
	// the caller's own storage sessions only.
	idx := map[string]lcFile{}
	var notes []string
	refs := req.Files
	sources := lcSources{}
	if req.SessionID != "" {
		if _, srcIdx, err := lc.source(c, sources, req.SessionID); err == nil {
			for id, f := range srcIdx {
				refs = append(refs, lcRef{ID: id, SessionID: req.SessionID, Name: f.Name})
			}
		}
	}
	for _, ref := range refs {
		if r.Context().Err() != nil {
			return // the client went away: nothing more is copied for it
		}
		sid := ref.StorageSessionID
		if sid == "" {
			sid = ref.SessionID
		}
		f, data, err := lc.readFile(c, sources, sid, ref.ID)
		if err != nil {
			notes = append(notes, fmt.Sprintf("srt-mcp: input file %s (%s/%s) is not available: %s", ref.Name, sid, ref.ID, coded(err)))
			continue
		}
		name := f.Name
		if ref.Name != "" && service.CheckName(ref.Name) == nil {
			name = strings.TrimPrefix(strings.TrimPrefix(ref.Name, service.WorkspaceMount), "/")
		}
		p, err := lc.svc.WriteFile(c, ss, "librechat.input", name, data, true)
		if err != nil {
			notes = append(notes, fmt.Sprintf("srt-mcp: input file %s: %s", name, coded(err)))
			continue
		}
		f.Name = strings.TrimPrefix(p, service.WorkspaceMount+"/") // as the listing names it
		idx[ref.ID] = f
	}
	// A stored session keeps its files for a day, not a container: the
	// next exec that needs one starts it (ReleaseBox).
	run, err := lc.svc.Start(r.Context(), service.Request{Op: "librechat.exec", Kind: "librechat", Caller: c, Workspace: ss, Language: rt.Language, Code: req.Code,
		Label: "librechat exec " + rt.Language, ReleaseBox: true})
	if err != nil {
		lcFail(w, err)
		return
	}
	res := run.Wait(r.Context())
	var stdout, stderr strings.Builder
	stdout.WriteString(res.Stdout)
	stderr.WriteString(res.Stderr)
	for _, n := range notes {
		stderr.WriteString(n + "\n")
	}
	exit, signal := 0, ""
	if end := res.End; end != nil {
		if end.Type == service.EventError {
			lcError(w, http.StatusBadGateway, "the sandbox failed: "+end.ErrCode+": "+end.Message)
			return
		}
		if c := res.ExitCode(); c != nil {
			exit = *c
		}
		if end.Type == service.EventExit {
			signal = end.Signal
		}
		if x := res.Explain(rt.Language); x != "" {
			if stderr.Len() > 0 && !strings.HasSuffix(stderr.String(), "\n") {
				stderr.WriteString("\n")
			}
			stderr.WriteString(x + "\n")
		}
	}
	sn := res.Snapshot
	idx, files := lc.indexRun(c, ss, idx, res.Changed)
	lc.mu.Lock()
	_ = lc.writeIndex(ss, idx)
	lc.mu.Unlock()
	stats := map[string]any{}
	wall := int64(0)
	if sn.End != nil {
		wall = sn.End.DurationMS
		stats["wall_time_ms"] = wall
		if sn.End.CPUMS > 0 || sn.End.MaxRSSBytes > 0 {
			stats["cpu_ms"], stats["memory_bytes"] = sn.End.CPUMS, sn.End.MaxRSSBytes
		}
	}
	resp := map[string]any{"session_id": ss.ID(), "stdout": stdout.String(), "stderr": service.ValidUTF8(stderr.String()),
		"files": files, "code": exit, "wall_time": wall, "stats": stats}
	if signal != "" {
		resp["signal"] = signal
	}
	lcJSON(w, http.StatusOK, resp)
}

// coded is err as a line of output says it: its code, then its message
// ("quota_exceeded: ...", as a run past the quota is reported).
func coded(err error) string {
	e := errs.Of(err)
	return e.Code + ": " + e.Detail()
}

// maxReplyFiles is what an exec's reply lists of the files it created or
// changed (LibreChat downloads every one at once); the session's listing
// has them all.
const maxReplyFiles = 50

// indexRun is the index of storage session ss after a run: every file
// the workspace holds, as the other doors list it (an input the run
// removed is gone, one it changed has its new size; inputs keep their
// ids), and the reply's files, those the run created or changed. A name
// no client can fetch by (control characters in it) is left out.
func (lc *librechat) indexRun(c service.Caller, ss *service.Workspace, inputs map[string]lcFile, changed []service.File) (map[string]lcFile, []map[string]any) {
	ids := map[string]string{}
	for id, f := range inputs {
		ids[f.Name] = id
	}
	isChanged := map[string]bool{}
	for _, f := range changed {
		isChanged[f.Name] = true
	}
	idx := map[string]lcFile{}
	files := []map[string]any{}
	listed, more := lc.svc.Files(c, ss, "librechat.index")
	if more > 0 {
		// The listing stopped at its bound (a run can make thousands of
		// files that sort first): the inputs and what the run changed are
		// indexed before the rest, so none of them drops out of sight.
		listed = append(append([]service.File(nil), changed...), listed...)
		for id, f := range inputs {
			idx[id] = f // gone from the workspace, it answers not found later
		}
	}
	indexed := map[string]bool{}
	for _, f := range listed {
		if indexed[f.Name] {
			continue
		}
		indexed[f.Name] = true
		if !f.Fetchable {
			continue
		}
		id, ok := ids[f.Name]
		if !ok {
			id = lcID()
		}
		in := inputs[id]
		idx[id] = lcFile{ID: id, Name: f.Name, Size: f.Size, Modified: f.ModTime.UTC(), Type: f.MIME, Kind: in.Kind, Entity: in.Entity}
		if isChanged[f.Name] && len(files) < maxReplyFiles {
			files = append(files, map[string]any{"id": id, "name": f.Name, "path": f.Path, "storage_session_id": ss.ID()})
		}
	}
	return idx, files
}

// lcSources are the storage sessions one exec copies inputs from, each
// with its index as read once for that exec: an exec naming a session of
// a thousand files reads its index once, not once per file.
type lcSources map[string]lcSource

type lcSource struct {
	ws  *service.Workspace
	idx map[string]lcFile
}

// source is the caller's storage session sid and its index, read at most
// once per exec (sources).
func (lc *librechat) source(c service.Caller, sources lcSources, sid string) (*service.Workspace, map[string]lcFile, error) {
	if s, ok := sources[sid]; ok {
		return s.ws, s.idx, nil
	}
	ws, err := lc.svc.LookupWorkspace(c, sid)
	if err != nil {
		return nil, nil, errs.New(errs.SessionNotFound, "no such session")
	}
	lc.mu.Lock()
	idx := lc.readIndex(ws)
	lc.mu.Unlock()
	sources[sid] = lcSource{ws: ws, idx: idx}
	return ws, idx, nil
}

// readFile reads file fid of the caller's storage session sid.
func (lc *librechat) readFile(c service.Caller, sources lcSources, sid, fid string) (lcFile, []byte, error) {
	src, idx, err := lc.source(c, sources, sid)
	if err != nil {
		return lcFile{}, nil, err
	}
	f, ok := idx[fid]
	if !ok {
		return lcFile{}, nil, errs.New(errs.NotFound, "no such file")
	}
	data, _, err := lc.svc.ReadFile(c, src, "librechat.input", f.Name, lc.svc.Config().MaxUploadBytes)
	return f, data, err
}

func (lc *librechat) upload(batch bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			lcError(w, http.StatusBadRequest, "want multipart/form-data with a file field: "+err.Error())
			return
		}
		c := caller(r)
		ss := lc.newStorage(w, r)
		if ss == nil {
			return
		}
		limit := lc.svc.Config().MaxUploadBytes
		refuse := func(reply func()) {
			_ = lc.svc.CloseWorkspace(c, ss.ID()) // nothing half-stored stays
			reply()
		}
		rep, err := lc.svc.UploadForm(c, ss, mr, service.UploadOptions{Op: "librechat.upload", Overwrite: true, KeepGoing: batch})
		if err != nil {
			// Its code and status are the service's (quota_exceeded is
			// 413, as MCP's upload_file and the playground say it).
			e := errs.Of(err)
			switch {
			case e.Code == errs.TooLarge && e.Field == "file":
				refuse(func() { lcFailAs(w, e, "File size limit exceeded", "limit_bytes", limit) })
			case e.Code == errs.TooLarge:
				refuse(func() { lcFail(w, e, "limit_bytes", limit) })
			default:
				refuse(func() { lcFail(w, e) })
			}
			return
		}
		type result struct {
			Status   string `json:"status,omitempty"`
			FileID   string `json:"fileId,omitempty"`
			Filename string `json:"filename"`
			Error    string `json:"error,omitempty"`
			Code     string `json:"code,omitempty"` // the error's code (quota_exceeded, too_large, ...)
		}
		var results []result
		idx := map[string]lcFile{}
		ok, failed := 0, 0
		for _, f := range rep.Files {
			if f.Err != nil {
				msg := f.Err.Detail()
				if f.Err.Code == errs.TooLarge {
					msg = "File size limit exceeded"
				}
				results = append(results, result{Status: "error", Filename: f.Name, Error: msg, Code: f.Err.Code})
				failed++
				continue
			}
			rel := strings.TrimPrefix(f.Path, service.WorkspaceMount+"/")
			id := lcID()
			idx[id] = lcFile{ID: id, Name: rel, Size: f.Size, Modified: time.Now().UTC(), Type: f.MIME,
				Kind: rep.Fields["kind"], Entity: rep.Fields["entity_id"]}
			if idx[id].Entity == "" {
				e := idx[id]
				e.Entity = rep.Fields["id"]
				idx[id] = e
			}
			results = append(results, result{Status: "success", FileID: id, Filename: rel})
			ok++
		}
		if !batch && ok == 0 {
			refuse(func() { lcError(w, http.StatusBadRequest, "no file part in the upload", "code", errs.InvalidArguments) })
			return
		}
		lc.mu.Lock()
		_ = lc.writeIndex(ss, idx)
		lc.mu.Unlock()
		if !batch {
			for i := range results {
				results[i].Status = ""
			}
			lcJSON(w, http.StatusOK, map[string]any{"message": "success", "session_id": ss.ID(), "storage_session_id": ss.ID(), "files": results})
			return
		}
		msg := "success"
		switch {
		case ok == 0:
			msg = "error"
		case failed > 0:
			msg = "partial_success"
		}
		lcJSON(w, http.StatusOK, map[string]any{"message": msg, "session_id": ss.ID(), "storage_session_id": ss.ID(), "files": results,
			"succeeded": ok, "failed": failed})
	}
}

func (lc *librechat) lookup(w http.ResponseWriter, r *http.Request) (*service.Workspace, lcFile, bool) {
	ss := lc.session(w, r, r.PathValue("sid"))
	if ss == nil {
		return nil, lcFile{}, false
	}
	lc.mu.Lock()
	f, ok := lc.readIndex(ss)[r.PathValue("fid")]
	lc.mu.Unlock()
	if !ok {
		lcError(w, http.StatusNotFound, "File not found", "details", "The file may have expired or does not exist")
		return nil, lcFile{}, false
	}
	return ss, f, true
}

func (lc *librechat) download(w http.ResponseWriter, r *http.Request) {
	ss, f, ok := lc.lookup(w, r)
	if !ok {
		return
	}
	fh, info, err := lc.svc.OpenFile(caller(r), ss, "librechat.download", f.Name)
	if err != nil {
		lcError(w, http.StatusNotFound, "File not found", "details", errs.Of(err).Detail())
		return
	}
	defer fh.Close()
	w.Header().Set("Content-Type", info.MIME)
	w.Header().Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(path.Base(f.Name)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", info.ModTime, fh)
}

func (lc *librechat) objectJSON(sid string, f lcFile, full bool) map[string]any {
	v := map[string]any{"name": sid + "/" + f.ID + path.Ext(f.Name), "size": f.Size, "lastModified": f.Modified.Format(time.RFC3339),
		"etag": fmt.Sprintf("%x-%x", f.Modified.UnixNano(), f.Size)}
	if full {
		// Its name in the workspace, directories included: what the exec
		// reply and the other doors call it, and where a client that
		// passes it back as an input's name gets it again.
		v["metadata"] = map[string]any{"content-type": f.Type, "original-filename": f.Name}
	}
	return v
}

func (lc *librechat) list(w http.ResponseWriter, r *http.Request) {
	ss := lc.session(w, r, r.PathValue("sid"))
	if ss == nil {
		return
	}
	lc.mu.Lock()
	idx := lc.readIndex(ss)
	lc.mu.Unlock()
	full := r.URL.Query().Get("detail") == "full"
	out := []map[string]any{}
	for _, f := range idx {
		out = append(out, lc.objectJSON(ss.ID(), f, full))
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["name"].(string) < out[j]["name"].(string) })
	lcJSON(w, http.StatusOK, out)
}

func (lc *librechat) object(w http.ResponseWriter, r *http.Request) {
	ss, f, ok := lc.lookup(w, r)
	if !ok {
		return
	}
	v := lc.objectJSON(ss.ID(), f, true)
	v["originalFilename"], v["contentType"] = f.Name, f.Type
	lcJSON(w, http.StatusOK, v)
}

func (lc *librechat) remove(w http.ResponseWriter, r *http.Request) {
	ss, f, ok := lc.lookup(w, r)
	if !ok {
		return
	}
	lc.mu.Lock()
	idx := lc.readIndex(ss)
	delete(idx, f.ID)
	err := lc.writeIndex(ss, idx)
	lc.mu.Unlock()
	if err != nil {
		lcError(w, http.StatusInternalServerError, err.Error())
		return
	}
	_ = lc.svc.RemoveFile(caller(r), ss, "librechat.delete", f.Name)
	lcJSON(w, http.StatusOK, map[string]any{"message": "deleted", "id": f.ID})
}
