package playground_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/playground"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/service/servicetest"
)

// newServer is the playground mounted as the server mounts it, behind a
// guard, over a real run service with no runtimes and no sandboxes; its
// keys are "k1" (principal key:one) and "k2" (key:two).
func newServer(t *testing.T, cfg service.Config) (http.Handler, *service.Service) {
	t.Helper()
	svc := servicetest.New(t, cfg)
	auth := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		switch r.Header.Get("Authorization") {
		case "Bearer k1":
			return "key:one", true
		case "Bearer k2":
			return "key:two", true
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"enter the server's API key"}` + "\n"))
		return "", false
	}
	mux := http.NewServeMux()
	playground.Mount(mux, guard.New(guard.Config{}), svc, auth)
	return mux, svc
}

func do(h http.Handler, method, path, key string, body io.Reader, ctype string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, body)
	r.RemoteAddr = "127.0.0.1:5000"
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("not JSON (%d): %q", w.Code, w.Body.String())
	}
	return v
}

func upload(files map[string]string) (io.Reader, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for name, content := range files {
		fw, _ := mw.CreateFormFile("file", name)
		_, _ = io.WriteString(fw, content)
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

// names are the file names of a files reply.
func names(t *testing.T, v map[string]any) []string {
	t.Helper()
	list, ok := v["files"].([]any)
	if !ok {
		t.Fatalf("no files list: %v", v)
	}
	out := []string{}
	for _, f := range list {
		m := f.(map[string]any)
		out = append(out, m["name"].(string))
	}
	return out
}

func TestRuntimesAndPage(t *testing.T) {
	h, _ := newServer(t, service.Config{})
	w := do(h, "GET", "/playground/api/runtimes", "k1", nil, "")
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"runtimes":[]}` {
		t.Errorf("runtimes of an empty registry: %d %s", w.Code, w.Body.String())
	}
	if w := do(h, "GET", "/playground/api/runtimes", "", nil, ""); w.Code != 401 {
		t.Errorf("runtimes without a key: %d", w.Code)
	}
	if w := do(h, "GET", "/playground/api/runtimes", "k3", nil, ""); w.Code != 401 || w.Header().Get("Connection") != "close" {
		t.Errorf("runtimes with a wrong key: %d %v", w.Code, w.Header())
	}
	// The page and its assets need no key.
	w = do(h, "GET", "/", "", nil, "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<html") || !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("the page: %d %v", w.Code, w.Header())
	}
	if w := do(h, "GET", "/static/app.js", "", nil, ""); w.Code != 200 || w.Body.Len() == 0 {
		t.Errorf("an asset: %d", w.Code)
	}
}

// Listing a conversation never makes its workspace; uploading does, in
// the caller's own namespace: another key naming the same conversation
// has another workspace.
func TestConversations(t *testing.T) {
	h, svc := newServer(t, service.Config{})
	files := func(key, convo string) *httptest.ResponseRecorder {
		return do(h, "GET", "/playground/api/files?conversation="+convo, key, nil, "")
	}
	w := files("k1", "c1")
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"files":[]}` {
		t.Fatalf("files of a conversation that does not exist: %d %s", w.Code, w.Body.String())
	}
	if n := svc.Stats().Sessions; n != 0 {
		t.Fatalf("listing made %d sessions", n)
	}

	body, ct := upload(map[string]string{"data.csv": "a,b\n", "in/notes.txt": "n"})
	w = do(h, "POST", "/playground/api/upload?conversation=c1", "k1", body, ct)
	v := decode(t, w)
	if w.Code != 200 {
		t.Fatalf("upload: %d %v", w.Code, v)
	}
	up, _ := v["uploaded"].([]any)
	if len(up) != 2 {
		t.Errorf("uploaded: %v", v)
	}
	if got := strings.Join(names(t, v), ","); got != "data.csv,in/notes.txt" {
		t.Errorf("the upload's listing: %s", got)
	}
	if n := svc.Stats().Sessions; n != 1 {
		t.Fatalf("one conversation, %d sessions", n)
	}
	w = files("k1", "c1")
	v = decode(t, w)
	if got := strings.Join(names(t, v), ","); got != "data.csv,in/notes.txt" {
		t.Fatalf("the conversation's files: %s", got)
	}
	f := v["files"].([]any)[0].(map[string]any)
	if f["path"] != "/mnt/data/data.csv" || f["size_bytes"] != float64(4) || f["mime_type"] != "text/csv" ||
		!strings.HasPrefix(f["download_url"].(string), "http://127.0.0.1:8080/files/sess_") || f["url"] != f["download_url"] {
		t.Errorf("a file: %v", f)
	}
	// The same conversation again is the same workspace.
	body, ct = upload(map[string]string{"more.txt": "m"})
	if w := do(h, "POST", "/playground/api/upload?conversation=c1", "k1", body, ct); w.Code != 200 {
		t.Fatalf("a second upload: %d %s", w.Code, w.Body.String())
	}
	if n := svc.Stats().Sessions; n != 1 {
		t.Errorf("the conversation's second upload made another session (%d)", n)
	}

	// Another key, the same conversation name: nothing of key one's.
	if got := names(t, decode(t, files("k2", "c1"))); len(got) != 0 {
		t.Errorf("key two sees key one's conversation: %v", got)
	}
	if n := svc.Stats().Sessions; n != 1 {
		t.Errorf("key two's listing made a session (%d)", n)
	}
	body, ct = upload(map[string]string{"two.txt": "2"})
	if w := do(h, "POST", "/playground/api/upload?conversation=c1", "k2", body, ct); w.Code != 200 {
		t.Fatalf("key two's upload: %d %s", w.Code, w.Body.String())
	}
	if n := svc.Stats().Sessions; n != 2 {
		t.Errorf("key two's conversation: %d sessions, want 2", n)
	}
	if got := strings.Join(names(t, decode(t, files("k2", "c1"))), ","); got != "two.txt" {
		t.Errorf("key two's conversation: %s", got)
	}
	if got := strings.Join(names(t, decode(t, files("k1", "c1"))), ","); got != "data.csv,in/notes.txt,more.txt" {
		t.Errorf("key one's conversation after key two's upload: %s", got)
	}
	// The workspace is the service's: key one's conversation is key one's.
	if _, err := svc.ConversationWorkspace(service.Caller{Principal: "key:one"}, "playground", "c1", false); err != nil {
		t.Error(err)
	}
	if w, _ := svc.ConversationWorkspace(service.Caller{Principal: "key:one"}, "mcp", "c1", false); w != nil {
		t.Errorf("the playground's conversation is in another door's namespace")
	}
}

// Errors are {"error", "code"} with the status that fits the code; a
// cross-site request is refused before anything runs.
func TestErrors(t *testing.T) {
	h, svc := newServer(t, service.Config{MaxUploadBytes: 100})
	for _, tc := range []struct {
		name, method, path string
		body               string
		ctype              string
		status             int
		code               string
	}{
		{"files without a conversation", "GET", "/playground/api/files", "", "", 400, "invalid_arguments"},
		{"files of a blank conversation", "GET", "/playground/api/files?conversation=%20", "", "", 400, "invalid_arguments"},
		{"files of a conversation name too long", "GET", "/playground/api/files?conversation=" + strings.Repeat("c", 257), "", "", 400, "invalid_arguments"},
		{"a run without JSON", "POST", "/playground/api/run", "{", "application/json", 400, "invalid_arguments"},
		{"a run without a language", "POST", "/playground/api/run", `{"code":"1","conversation":"c"}`, "application/json", 400, "invalid_arguments"},
		{"a run in an unknown language", "POST", "/playground/api/run", `{"language":"cobol","code":"1","conversation":"c"}`, "application/json", 400, "unsupported_language"},
		{"an upload that is not multipart", "POST", "/playground/api/upload?conversation=c", "{}", "application/json", 400, "invalid_arguments"},
		{"an upload without a conversation", "POST", "/playground/api/upload", "", "multipart", 400, "invalid_arguments"},
		{"an upload past the limit", "POST", "/playground/api/upload?conversation=big", "", "big", 413, "too_large"},
		{"an upload outside the workspace", "POST", "/playground/api/upload?conversation=bad", "", "escape", 400, "invalid_path"},
	} {
		var body io.Reader = strings.NewReader(tc.body)
		ctype := tc.ctype
		switch tc.ctype {
		case "multipart":
			body, ctype = upload(map[string]string{"a.txt": "a"})
		case "big":
			body, ctype = upload(map[string]string{"a.txt": strings.Repeat("a", 101)})
		case "escape":
			body, ctype = upload(map[string]string{"../a.txt": "a"})
		}
		w := do(h, tc.method, tc.path, "k1", body, ctype)
		v := decode(t, w)
		if w.Code != tc.status || v["code"] != tc.code || v["error"] == "" || v["error"] == nil {
			t.Errorf("%s: %d %v, want %d %s", tc.name, w.Code, v, tc.status, tc.code)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
	}
	// Cross-site: refused on every API route, nothing made.
	for _, q := range []struct{ method, path string }{
		{"GET", "/playground/api/runtimes"},
		{"GET", "/playground/api/files?conversation=x"},
		{"POST", "/playground/api/upload?conversation=x"},
		{"POST", "/playground/api/run"},
		{"GET", "/"},
	} {
		var body io.Reader
		ctype := ""
		if q.method == "POST" {
			body, ctype = upload(map[string]string{"x.txt": "x"})
		}
		w := do(h, q.method, q.path, "k1", body, ctype, "Sec-Fetch-Site", "cross-site")
		if w.Code != 403 {
			t.Errorf("cross-site %s %s: %d", q.method, q.path, w.Code)
		}
	}
	// A foreign Origin likewise.
	body, ct := upload(map[string]string{"x.txt": "x"})
	if w := do(h, "POST", "/playground/api/upload?conversation=x", "k1", body, ct, "Origin", "https://evil.example"); w.Code != 403 {
		t.Errorf("a foreign origin's upload: %d", w.Code)
	}
	// Of the refused uploads, only those that reached the service made a
	// workspace (big, bad); no cross-site one did.
	if n := svc.Stats().Sessions; n > 2 {
		t.Errorf("%d sessions after refused requests", n)
	}
	for _, convo := range []string{"x"} {
		if w, _ := svc.ConversationWorkspace(service.Caller{Principal: "key:one"}, "playground", convo, false); w != nil {
			t.Errorf("a refused request made conversation %s", convo)
		}
	}
	// A refused upload stored nothing.
	if w, _ := svc.ConversationWorkspace(service.Caller{Principal: "key:one"}, "playground", "big", false); w != nil {
		listed, _ := svc.Files(service.Caller{Principal: "key:one"}, w, "test")
		for _, f := range listed {
			t.Errorf("a refused upload stored %s", f.Name)
		}
		ss, _ := svc.Sessions().Get(w.ID())
		if _, err := os.Lstat(filepath.Join(ss.Workspace, "a.txt")); err == nil {
			t.Error("the oversize file is in the workspace")
		}
	}
}
