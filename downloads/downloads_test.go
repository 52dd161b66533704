package downloads_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/downloads"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/service/servicetest"
)

var secret = []byte("unit-test-secret-0123456789abcdef")

// newService is a real run service on a session registry in a temporary
// state directory; no run starts a sandbox.
func newService(t *testing.T) *service.Service {
	t.Helper()
	return servicetest.New(t, service.Config{Files: &service.Signer{Secret: secret, BaseURL: "http://127.0.0.1:8080/"}})
}

var (
	alice = service.Caller{Principal: "key:alice", Addr: "10.0.0.1"}
	bob   = service.Caller{Principal: "key:bob", Addr: "10.0.0.2"}
)

func get(h http.Handler, u string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", u, nil))
	return w
}

// link is a signed URL taken apart.
type link struct {
	path           string // /files/sid/name, escaped
	exp, inc, sig  string
	sessionID, raw string
}

func parse(t *testing.T, raw string) link {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host != "127.0.0.1:8080" || !strings.HasPrefix(u.Path, "/files/") {
		t.Fatalf("not a download URL: %q", raw)
	}
	q := u.Query()
	sid, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/files/"), "/")
	return link{path: u.EscapedPath(), exp: q.Get("exp"), inc: q.Get("inc"), sig: q.Get("sig"), sessionID: sid, raw: raw}
}

func (l link) url(path, exp, inc, sig string) string {
	return "http://127.0.0.1:8080" + path + "?exp=" + url.QueryEscape(exp) + "&inc=" + url.QueryEscape(inc) + "&sig=" + url.QueryEscape(sig)
}

// mac is the documented signature (service.Signer): HMAC-SHA256 over
// "session/filename\nexp\nincarnation".
func mac(sessionID, filename, exp, inc string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(sessionID + "/" + filename + "\n" + exp + "\n" + inc))
	return hex.EncodeToString(m.Sum(nil))
}

// A URL the service signed serves its file, as an attachment the browser
// does not sniff or cache; anything changed in it is 403 before the
// session is looked at.
func TestSignedURL(t *testing.T) {
	svc := newService(t)
	h := downloads.Handler(svc)
	w, _, err := svc.OpenWorkspace(alice, "")
	if err != nil {
		t.Fatal(err)
	}
	html := "<script>alert(1)</script>"
	for name, data := range map[string]string{"out/report.html": html, "other.txt": "other", "my report ü.txt": "spaced"} {
		if _, err := svc.WriteFile(alice, w, "test", name, []byte(data), false); err != nil {
			t.Fatal(err)
		}
	}
	l := parse(t, svc.FileURL(w, "out/report.html"))
	if l.sessionID != w.ID() || l.path != "/files/"+w.ID()+"/out/report.html" {
		t.Fatalf("the URL: %q", l.raw)
	}
	if exp, err := strconv.ParseInt(l.exp, 10, 64); err != nil || time.Until(time.Unix(exp, 0)) < 23*time.Hour {
		t.Errorf("the URL's expiry %q is not the default 24 h away", l.exp)
	}

	rec := get(h, l.raw)
	if rec.Code != 200 || rec.Body.String() != html {
		t.Fatalf("the signed URL: %d %q", rec.Code, rec.Body.String())
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/html",
		"X-Content-Type-Options": "nosniff",
		"Content-Disposition":    `attachment; filename=report.html`,
		"Cache-Control":          "private, no-store",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// A name that needs escaping, in the URL and in the header.
	rec = get(h, svc.FileURL(w, "my report ü.txt"))
	if rec.Code != 200 || rec.Body.String() != "spaced" {
		t.Errorf("an escaped name: %d %q", rec.Code, rec.Body.String())
	}
	if cd := rec.Header().Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment; filename*=utf-8''my%20report%20%C3%BC.txt") {
		t.Errorf("an escaped name's Content-Disposition: %q", cd)
	}
	// The listing's URLs are the same kind of link.
	listed, _ := svc.Files(alice, w, "test")
	for _, f := range listed {
		if rec := get(h, f.URL); rec.Code != 200 {
			t.Errorf("the listing's URL of %s: %d", f.Name, rec.Code)
		}
	}

	flip := func(s string) string {
		b := []byte(s)
		if b[0] == '0' {
			b[0] = '1'
		} else {
			b[0] = '0'
		}
		return string(b)
	}
	exp, _ := strconv.ParseInt(l.exp, 10, 64)
	past := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	w2, _, _ := svc.OpenWorkspace(alice, "")
	if _, err := svc.WriteFile(alice, w2, "test", "out/report.html", []byte("w2's"), false); err != nil {
		t.Fatal(err)
	}
	other := parse(t, svc.FileURL(w, "other.txt"))
	for name, u := range map[string]string{
		"a tampered signature":    l.url(l.path, l.exp, l.inc, flip(l.sig)),
		"an upper-case signature": l.url(l.path, l.exp, l.inc, strings.ToUpper(l.sig)),
		"no signature":            l.url(l.path, l.exp, l.inc, ""),
		"a moved expiry":          l.url(l.path, strconv.FormatInt(exp+3600, 10), l.inc, l.sig),
		"no expiry":               l.url(l.path, "", l.inc, l.sig),
		"a malformed expiry":      l.url(l.path, l.exp+"x", l.inc, l.sig),
		"an expired link":         l.url(l.path, past, l.inc, mac(w.ID(), "out/report.html", past, l.inc)),
		"another incarnation":     l.url(l.path, l.exp, flip(l.inc), l.sig),
		"another file":            l.url("/files/"+w.ID()+"/other.txt", l.exp, l.inc, l.sig),
		"another file's link":     l.url(l.path, other.exp, other.inc, other.sig),
		"another session":         l.url("/files/"+w2.ID()+"/out/report.html", l.exp, l.inc, l.sig),
		"a path around the name":  l.url("/files/"+w.ID()+"/out/../out/report.html", l.exp, l.inc, l.sig),
	} {
		rec := get(h, u)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d %q, want 403", name, rec.Code, rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), "alert") || strings.Contains(rec.Body.String(), "w2's") {
			t.Errorf("%s served the file", name)
		}
	}
	// A link to a file that is not there, and malformed paths.
	if rec := get(h, svc.FileURL(w, "nope.txt")); rec.Code != 404 {
		t.Errorf("a missing file: %d", rec.Code)
	}
	if rec := get(h, svc.FileURL(w, "out")); rec.Code != 404 {
		t.Errorf("a directory: %d", rec.Code)
	}
	for _, p := range []string{"/files/", "/files/" + w.ID(), "/files/" + w.ID() + "/", "/files//out/report.html"} {
		if rec := get(h, "http://127.0.0.1:8080"+p+"?exp="+l.exp+"&inc="+l.inc+"&sig="+l.sig); rec.Code != 404 {
			t.Errorf("GET %s: %d", p, rec.Code)
		}
	}
}

// A link dies with its session: closed, or the same id opened again by
// anyone (another incarnation), it is 404.
func TestSessionEnds(t *testing.T) {
	svc := newService(t)
	h := downloads.Handler(svc)
	w, _, _ := svc.OpenWorkspace(alice, "")
	if _, err := svc.WriteFile(alice, w, "test", "a.txt", []byte("alice's"), false); err != nil {
		t.Fatal(err)
	}
	u := svc.FileURL(w, "a.txt")
	if rec := get(h, u); rec.Code != 200 {
		t.Fatalf("before the close: %d", rec.Code)
	}
	id := w.ID()
	if err := svc.CloseWorkspace(alice, id); err != nil {
		t.Fatal(err)
	}
	if rec := get(h, u); rec.Code != 404 {
		t.Errorf("after the close: %d %q", rec.Code, rec.Body.String())
	}
	for _, c := range []service.Caller{bob, alice} {
		again, created, err := svc.OpenWorkspace(c, id)
		if err != nil || !created || again.ID() != id {
			t.Fatalf("reopening %s as %s: %v %v", id, c.Principal, created, err)
		}
		if _, err := svc.WriteFile(c, again, "test", "a.txt", []byte(c.Principal+"'s"), false); err != nil {
			t.Fatal(err)
		}
		if rec := get(h, u); rec.Code != 404 || strings.Contains(rec.Body.String(), "'s") {
			t.Errorf("the old link in the session reopened by %s: %d %q", c.Principal, rec.Code, rec.Body.String())
		}
		if rec := get(h, svc.FileURL(again, "a.txt")); rec.Code != 200 || rec.Body.String() != c.Principal+"'s" {
			t.Errorf("the new incarnation's own link: %d %q", rec.Code, rec.Body.String())
		}
		if err := svc.CloseWorkspace(c, id); err != nil {
			t.Fatal(err)
		}
	}
}

// A link a run planted in the workspace (to a host file, to a directory
// outside, to a FIFO) is 404 and nothing behind it is opened.
func TestPlantedLinks(t *testing.T) {
	svc := newService(t)
	h := downloads.Handler(svc)
	w, _, _ := svc.OpenWorkspace(alice, "")
	ss, err := svc.Sessions().Get(w.ID())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(outside, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"secret.txt": filepath.Join(outside, "secret.txt"),
		"dir":        outside,
		"fifo":       fifo,
		"passwd":     "/etc/passwd",
		"rel.txt":    "../../../../../../../../" + strings.TrimPrefix(filepath.Join(outside, "secret.txt"), "/"),
	} {
		if err := os.Symlink(target, filepath.Join(ss.Workspace, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A FIFO in the workspace itself.
	if err := syscall.Mkfifo(filepath.Join(ss.Workspace, "pipe"), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secret.txt", "dir/secret.txt", "fifo", "passwd", "rel.txt", "pipe"} {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() { done <- get(h, svc.FileURL(w, name)) }()
		select {
		case rec := <-done:
			if rec.Code != 404 || strings.Contains(rec.Body.String(), "secret") || strings.Contains(rec.Body.String(), "root:") {
				t.Errorf("%s: %d %q, want 404 and nothing read", name, rec.Code, rec.Body.String())
			}
		case <-time.After(5 * time.Second):
			// Unblock the open, then fail.
			if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			if f, err := os.OpenFile(filepath.Join(ss.Workspace, "pipe"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			t.Fatalf("%s: the download opened a FIFO and blocked", name)
		}
	}
	// The links are still there, the files behind them untouched.
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "host secret" {
		t.Errorf("the target: %q %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(ss.Workspace, "secret.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link: %v %v", fi, err)
	}
}
