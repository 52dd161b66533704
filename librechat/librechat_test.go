package librechat_test

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/service/servicetest"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// newService is a real run service on a session registry in a temporary
// state directory, by default with no runtimes and a backend that starts
// no sandbox (runs are the integration suite's to test).
func newService(t *testing.T, cfg service.Config) *service.Service {
	t.Helper()
	return servicetest.New(t, cfg)
}

// keys are generated once: an RSA key costs tens of milliseconds.
var keys = sync.OnceValues(func() (ed25519.PrivateKey, *rsa.PrivateKey) {
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return ed, rk
})

func edKey() ed25519.PrivateKey { k, _ := keys(); return k }
func rsaKey() *rsa.PrivateKey   { _, k := keys(); return k }

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claims are a valid token's: subject sub, audience codeapi, an hour left.
func claims(sub string) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "aud": "codeapi", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

type req struct {
	method, path string
	body         io.Reader
	ctype        string
	hdr          map[string]string
	remote       string
}

func serve(h http.Handler, q req) *httptest.ResponseRecorder {
	r := httptest.NewRequest(q.method, "http://127.0.0.1:8080"+q.path, q.body)
	if q.ctype != "" {
		r.Header.Set("Content-Type", q.ctype)
	}
	for k, v := range q.hdr {
		r.Header.Set(k, v)
	}
	r.RemoteAddr = "192.0.2.1:4000"
	if q.remote != "" {
		r.RemoteAddr = q.remote
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func jsonOf(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("not a JSON object (%d): %q", w.Code, w.Body.String())
	}
	return v
}

type part struct{ field, filename, content string }

// form is a multipart body: parts with a filename are files, the others
// fields.
func form(parts ...part) (io.Reader, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		if p.filename == "" {
			_ = mw.WriteField(p.field, p.content)
			continue
		}
		fw, _ := mw.CreateFormFile(p.field, p.filename)
		_, _ = io.WriteString(fw, p.content)
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

const noSuchSession = "/files/sess_0123456789ab"

// Authentication: an API key, a Bearer JWT (EdDSA or RS256, audience
// codeapi, an expiry, the key's own algorithm), or nothing when so
// configured. A route reached with valid credentials answers 404 for a
// session that does not exist; refused ones 401.
func TestAuthentication(t *testing.T) {
	svc := newService(t, service.Config{})
	ed, rk := edKey(), rsaKey()
	_, otherEdPriv, _ := ed25519.GenerateKey(rand.Reader)
	pubPEM, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubPEM})
	noneTok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("mallory"))

	edOnly := librechat.New(librechat.Config{APIKey: "k-123", JWTKeys: []crypto.PublicKey{ed.Public()}}, svc)
	rsaOnly := librechat.New(librechat.Config{JWTKeys: []crypto.PublicKey{&rk.PublicKey}}, svc)
	both := librechat.New(librechat.Config{JWTKeys: []crypto.PublicKey{&rk.PublicKey, ed.Public()}}, svc)
	noKey := librechat.New(librechat.Config{}, svc)
	open := librechat.New(librechat.Config{NoAuth: true, APIKey: "k-123"}, svc)

	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	for _, tc := range []struct {
		name string
		h    http.Handler
		hdr  map[string]string
		want int
	}{
		{"the API key", edOnly, map[string]string{"X-API-Key": "k-123"}, 404},
		{"a wrong API key", edOnly, map[string]string{"X-API-Key": "k-124"}, 401},
		{"a prefix of the API key", edOnly, map[string]string{"X-API-Key": "k-12"}, 401},
		{"an API key where none is configured", noKey, map[string]string{"X-API-Key": "anything"}, 401},
		{"an API key where none is configured, NoAuth", librechat.New(librechat.Config{NoAuth: true}, svc), map[string]string{"X-API-Key": "anything"}, 401},
		{"no credentials", edOnly, nil, 401},
		{"no credentials, NoAuth", open, nil, 404},
		{"a wrong API key, NoAuth", open, map[string]string{"X-API-Key": "nope"}, 401},

		{"EdDSA", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, claims("u1"))), 404},
		{"RS256", rsaOnly, bearer(sign(t, jwt.SigningMethodRS256, rk, claims("u1"))), 404},
		{"EdDSA after an RSA key", both, bearer(sign(t, jwt.SigningMethodEdDSA, ed, claims("u1"))), 404},
		{"RS256 before an Ed25519 key", both, bearer(sign(t, jwt.SigningMethodRS256, rk, claims("u1"))), 404},
		{"an audience list with codeapi", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, with(claims("u1"), "aud", []string{"other", "codeapi"}))), 404},
		{"within the leeway", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, with(claims("u1"), "exp", time.Now().Add(-10*time.Second).Unix()))), 404},

		{"a wrong audience", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, with(claims("u1"), "aud", "other"))), 401},
		{"no audience", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, with(claims("u1"), "aud", nil))), 401},
		{"expired", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, with(claims("u1"), "exp", time.Now().Add(-time.Hour).Unix()))), 401},
		{"no expiry", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, with(claims("u1"), "exp", nil))), 401},
		{"not valid yet", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, with(claims("u1"), "nbf", time.Now().Add(time.Hour).Unix()))), 401},
		{"another Ed25519 key's", edOnly, bearer(sign(t, jwt.SigningMethodEdDSA, otherEdPriv, claims("u1"))), 401},
		{"HS256 keyed with the Ed25519 public key", edOnly, bearer(sign(t, jwt.SigningMethodHS256, []byte(ed.Public().(ed25519.PublicKey)), claims("u1"))), 401},
		{"HS256 keyed with the RSA public key's PEM", rsaOnly, bearer(sign(t, jwt.SigningMethodHS256, rsaPEM, claims("u1"))), 401},
		{"HS256 keyed with the RSA public key's DER", rsaOnly, bearer(sign(t, jwt.SigningMethodHS256, pubPEM, claims("u1"))), 401},
		{"RS256 against an Ed25519 key", edOnly, bearer(sign(t, jwt.SigningMethodRS256, rk, claims("u1"))), 401},
		{"EdDSA against an RSA key", rsaOnly, bearer(sign(t, jwt.SigningMethodEdDSA, ed, claims("u1"))), 401},
		{"PS256 with the RSA key", rsaOnly, bearer(sign(t, jwt.SigningMethodPS256, rk, claims("u1"))), 401},
		{"alg none", edOnly, bearer(noneTok), 401},
		{"alg none, both keys", both, bearer(noneTok), 401},
		{"alg none, NoAuth", open, bearer(noneTok), 401},
		{"garbage", edOnly, bearer("not.a.jwt"), 401},
		{"a bearer token where none is configured", noKey, bearer(sign(t, jwt.SigningMethodEdDSA, ed, claims("u1"))), 401},
	} {
		w := serve(tc.h, req{method: "GET", path: noSuchSession, hdr: tc.hdr})
		if w.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, w.Code, strings.TrimSpace(w.Body.String()), tc.want)
			continue
		}
		if v := jsonOf(t, w); w.Code == 401 && v["error"] == "" {
			t.Errorf("%s: a refusal without an error: %v", tc.name, v)
		}
	}
}

// Each principal is named for what authenticated it, and owns what it
// stores: the audit log names it, and the service finds its storage
// session for that principal only.
func TestPrincipalNames(t *testing.T) {
	svc := newService(t, service.Config{})
	ed := edKey()
	h := librechat.New(librechat.Config{APIKey: "k-123", JWTKeys: []crypto.PublicKey{ed.Public()}, NoAuth: true}, svc)
	for _, tc := range []struct {
		hdr  map[string]string
		want string
	}{
		{map[string]string{"X-API-Key": "k-123"}, "librechat:apikey"},
		{map[string]string{"Authorization": "Bearer " + sign(t, jwt.SigningMethodEdDSA, ed, claims("user-42"))}, "librechat:jwt:user-42"},
		{nil, "librechat:anonymous"},
	} {
		body, ct := form(part{"file", "a.txt", "x"})
		w := serve(h, req{method: "POST", path: "/upload", body: body, ctype: ct, hdr: tc.hdr})
		if w.Code != 200 {
			t.Fatalf("%s: upload: %d %s", tc.want, w.Code, w.Body.String())
		}
		sid, _ := jsonOf(t, w)["session_id"].(string)
		if _, err := svc.LookupWorkspace(service.Caller{Principal: tc.want}, sid); err != nil {
			t.Errorf("the upload's session is not %s's: %v", tc.want, err)
		}
		for _, other := range []string{"librechat:apikey", "librechat:jwt:user-43", "librechat:anonymous", "anonymous", "apikey"} {
			if other == tc.want {
				continue
			}
			if _, err := svc.LookupWorkspace(service.Caller{Principal: other}, sid); err == nil {
				t.Errorf("%s's session is also %s's", tc.want, other)
			}
		}
		log, _ := os.ReadFile(sessions.AuditPath(svc.Sessions().StateDir(), sid))
		if !bytes.Contains(log, []byte(`"principal":"`+tc.want+`"`)) {
			t.Errorf("the audit log does not name %s:\n%s", tc.want, log)
		}
	}
}

// Rate limits are per principal and per class of routes: past one, 429
// with retry_after_seconds and Retry-After; another class or another
// principal is unaffected; anonymous callers are told apart by address.
func TestRateLimits(t *testing.T) {
	svc := newService(t, service.Config{})
	ed := edKey()
	// 1% of the defaults: one request per class per window.
	h := librechat.New(librechat.Config{APIKey: "k-123", JWTKeys: []crypto.PublicKey{ed.Public()}, NoAuth: true, RateScale: 0.01}, svc)
	key := map[string]string{"X-API-Key": "k-123"}
	list := func(hdr map[string]string, remote string) *httptest.ResponseRecorder {
		return serve(h, req{method: "GET", path: noSuchSession, hdr: hdr, remote: remote})
	}
	if w := list(key, ""); w.Code != 404 {
		t.Fatalf("the first listing: %d %s", w.Code, w.Body.String())
	}
	w := list(key, "")
	if w.Code != 429 {
		t.Fatalf("the second listing in the window: %d %s", w.Code, w.Body.String())
	}
	v := jsonOf(t, w)
	secs, _ := v["retry_after_seconds"].(float64)
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if v["error"] != "rate_limited" || secs < 1 || secs > 60 || err != nil || float64(ra) != secs {
		t.Fatalf("a refusal: %v, Retry-After %q", v, w.Header().Get("Retry-After"))
	}
	// The same class through another route of it (DELETE and objects are
	// "list" too).
	if w := serve(h, req{method: "GET", path: "/sessions/sess_0123456789ab/objects/x", hdr: key}); w.Code != 429 {
		t.Errorf("another route of the class: %d", w.Code)
	}
	// Another class of the same principal.
	if w := serve(h, req{method: "GET", path: "/download/sess_0123456789ab/x", hdr: key}); w.Code != 404 {
		t.Errorf("a download after listings: %d %s", w.Code, w.Body.String())
	}
	if w := serve(h, req{method: "GET", path: "/download/sess_0123456789ab/x", hdr: key}); w.Code != 429 {
		t.Errorf("the second download: %d", w.Code)
	}
	// Another principal.
	u1 := map[string]string{"Authorization": "Bearer " + sign(t, jwt.SigningMethodEdDSA, ed, claims("u1"))}
	u2 := map[string]string{"Authorization": "Bearer " + sign(t, jwt.SigningMethodEdDSA, ed, claims("u2"))}
	if w := list(u1, ""); w.Code != 404 {
		t.Errorf("a JWT subject after the API key: %d", w.Code)
	}
	if w := list(u1, ""); w.Code != 429 {
		t.Errorf("the subject's second listing: %d", w.Code)
	}
	if w := list(u2, ""); w.Code != 404 {
		t.Errorf("another subject: %d", w.Code)
	}
	// Anonymous callers: one bucket per address.
	if w := list(nil, "198.51.100.1:1"); w.Code != 404 {
		t.Errorf("an anonymous caller: %d", w.Code)
	}
	if w := list(nil, "198.51.100.1:2"); w.Code != 429 {
		t.Errorf("the same address again (another port): %d", w.Code)
	}
	if w := list(nil, "198.51.100.2:1"); w.Code != 404 {
		t.Errorf("another anonymous address: %d", w.Code)
	}
	// A refused request is not counted against the next window: health is
	// never limited.
	for i := 0; i < 3; i++ {
		if w := serve(h, req{method: "GET", path: "/health"}); w.Code != 200 {
			t.Fatalf("health: %d", w.Code)
		}
	}
}

var lcIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{21}$`)

// The file routes through the real handler and a real service: upload,
// list, download, object, delete; another principal finds none of it.
func TestFileRoutes(t *testing.T) {
	svc := newService(t, service.Config{})
	ed := edKey()
	h := librechat.New(librechat.Config{JWTKeys: []crypto.PublicKey{ed.Public()}}, svc)
	alice := map[string]string{"Authorization": "Bearer " + sign(t, jwt.SigningMethodEdDSA, ed, claims("alice"))}
	bob := map[string]string{"Authorization": "Bearer " + sign(t, jwt.SigningMethodEdDSA, ed, claims("bob"))}

	body, ct := form(part{"entity_id", "", "asst_1"}, part{"file", "report.csv", "a,b\n1,2\n"})
	w := serve(h, req{method: "POST", path: "/upload", body: body, ctype: ct, hdr: alice})
	if w.Code != 200 {
		t.Fatalf("upload: %d %s", w.Code, w.Body.String())
	}
	var up struct {
		Message          string `json:"message"`
		SessionID        string `json:"session_id"`
		StorageSessionID string `json:"storage_session_id"`
		Files            []struct {
			FileID   string `json:"fileId"`
			Filename string `json:"filename"`
			Status   string `json:"status"`
		} `json:"files"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &up); err != nil {
		t.Fatal(err)
	}
	if up.Message != "success" || up.SessionID == "" || up.StorageSessionID != up.SessionID || len(up.Files) != 1 ||
		up.Files[0].Filename != "report.csv" || !lcIDPattern.MatchString(up.Files[0].FileID) || up.Files[0].Status != "" {
		t.Fatalf("upload reply: %s", w.Body.String())
	}
	sid, fid := up.SessionID, up.Files[0].FileID
	ss, err := svc.Sessions().Get(sid)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ss.Workspace, "report.csv")); err != nil || string(b) != "a,b\n1,2\n" {
		t.Fatalf("the stored file: %q %v", b, err)
	}

	// Listing.
	w = serve(h, req{method: "GET", path: "/files/" + sid + "?detail=full", hdr: alice})
	var list []map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || err != nil || len(list) != 1 {
		t.Fatalf("list: %d %s", w.Code, w.Body.String())
	}
	meta, _ := list[0]["metadata"].(map[string]any)
	if list[0]["name"] != sid+"/"+fid+".csv" || list[0]["size"] != float64(8) || meta["original-filename"] != "report.csv" || meta["content-type"] != "text/csv" {
		t.Errorf("list entry: %v", list[0])
	}
	w = serve(h, req{method: "GET", path: "/files/" + sid, hdr: alice})
	if !strings.Contains(w.Body.String(), fid) || strings.Contains(w.Body.String(), "metadata") {
		t.Errorf("a short listing: %s", w.Body.String())
	}

	// Download.
	w = serve(h, req{method: "GET", path: "/download/" + sid + "/" + fid, hdr: alice})
	if w.Code != 200 || w.Body.String() != "a,b\n1,2\n" {
		t.Fatalf("download: %d %q", w.Code, w.Body.String())
	}
	if got := w.Header().Get("Content-Type"); got != "text/csv" {
		t.Errorf("download Content-Type %q", got)
	}
	if got := w.Header().Get("Content-Disposition"); got != "attachment; filename*=UTF-8''report.csv" {
		t.Errorf("download Content-Disposition %q", got)
	}
	if w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("download without nosniff")
	}

	// Object.
	w = serve(h, req{method: "GET", path: "/sessions/" + sid + "/objects/" + fid, hdr: alice})
	obj := jsonOf(t, w)
	if w.Code != 200 || obj["originalFilename"] != "report.csv" || obj["contentType"] != "text/csv" || obj["name"] != sid+"/"+fid+".csv" {
		t.Errorf("object: %d %v", w.Code, obj)
	}

	// Unknown file ids and sessions.
	for _, p := range []string{"/download/" + sid + "/nope", "/sessions/" + sid + "/objects/nope", "/download/sess_0123456789ab/" + fid} {
		if w := serve(h, req{method: "GET", path: p, hdr: alice}); w.Code != 404 {
			t.Errorf("GET %s: %d", p, w.Code)
		}
	}
	if w := serve(h, req{method: "DELETE", path: "/files/" + sid + "/nope", hdr: alice}); w.Code != 404 {
		t.Errorf("DELETE an unknown file: %d", w.Code)
	}

	// Another subject: the same ids are nothing.
	for _, q := range []req{
		{method: "GET", path: "/files/" + sid},
		{method: "GET", path: "/download/" + sid + "/" + fid},
		{method: "GET", path: "/sessions/" + sid + "/objects/" + fid},
		{method: "DELETE", path: "/files/" + sid + "/" + fid},
	} {
		q.hdr = bob
		w := serve(h, q)
		if w.Code != 404 || strings.Contains(w.Body.String(), "report") || strings.Contains(w.Body.String(), "a,b") {
			t.Errorf("bob: %s %s: %d %s", q.method, q.path, w.Code, w.Body.String())
		}
	}
	// A listing of bob's own shows nothing of alice's either.
	if _, err := os.Stat(filepath.Join(ss.Workspace, "report.csv")); err != nil {
		t.Fatalf("bob's DELETE removed alice's file: %v", err)
	}

	// Delete.
	w = serve(h, req{method: "DELETE", path: "/files/" + sid + "/" + fid, hdr: alice})
	if v := jsonOf(t, w); w.Code != 200 || v["message"] != "deleted" || v["id"] != fid {
		t.Fatalf("delete: %d %v", w.Code, v)
	}
	if _, err := os.Lstat(filepath.Join(ss.Workspace, "report.csv")); !os.IsNotExist(err) {
		t.Errorf("the deleted file is still in the workspace: %v", err)
	}
	if w := serve(h, req{method: "GET", path: "/download/" + sid + "/" + fid, hdr: alice}); w.Code != 404 {
		t.Errorf("a deleted file's download: %d", w.Code)
	}
	w = serve(h, req{method: "GET", path: "/files/" + sid, hdr: alice})
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != "[]" {
		t.Errorf("the listing after delete: %d %s", w.Code, w.Body.String())
	}

	// A stored file a run replaced with a link: its download reads
	// nothing through it.
	body, ct = form(part{"file", "notes.txt", "notes"})
	w = serve(h, req{method: "POST", path: "/upload", body: body, ctype: ct, hdr: alice})
	if err := json.Unmarshal(w.Body.Bytes(), &up); err != nil || w.Code != 200 {
		t.Fatalf("upload: %d %s", w.Code, w.Body.String())
	}
	ss, _ = svc.Sessions().Get(up.SessionID)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ss.Workspace, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ss.Workspace, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	w = serve(h, req{method: "GET", path: "/download/" + up.SessionID + "/" + up.Files[0].FileID, hdr: alice})
	if w.Code != 404 || strings.Contains(w.Body.String(), "host secret") {
		t.Errorf("a download through a planted link: %d %q", w.Code, w.Body.String())
	}
	w = serve(h, req{method: "DELETE", path: "/files/" + up.SessionID + "/" + up.Files[0].FileID, hdr: alice})
	if b, err := os.ReadFile(secret); w.Code != 200 || err != nil || string(b) != "host secret" {
		t.Errorf("deleting a planted link: %d, the target %q %v", w.Code, b, err)
	}
}

// Uploads: one file per upload's storage session, kept in a directory when
// sent with one; the batch reports what it could not store; the bounds of
// a form and the workspace quota are 413 with the service's code; a form
// without a file is 400.
func TestUploads(t *testing.T) {
	svc := newService(t, service.Config{MaxUploadBytes: 1000, WorkspaceQuota: 700})
	h := librechat.New(librechat.Config{APIKey: "k"}, svc)
	key := map[string]string{"X-API-Key": "k"}
	post := func(path string, parts ...part) (*httptest.ResponseRecorder, map[string]any) {
		body, ct := form(parts...)
		w := serve(h, req{method: "POST", path: path, body: body, ctype: ct, hdr: key})
		return w, jsonOf(t, w)
	}
	storage := func() int {
		ents, _ := os.ReadDir(filepath.Join(svc.Sessions().StateDir(), "workspaces"))
		n := 0
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "cache-") {
				n++
			}
		}
		return n
	}

	// A batch with one file past the limit.
	w, v := post("/upload/batch", part{"file", "big.bin", strings.Repeat("x", 1001)}, part{"file", "ok.txt", "fine"})
	if w.Code != 200 || v["message"] != "partial_success" || v["succeeded"] != float64(1) || v["failed"] != float64(1) {
		t.Fatalf("a batch with an oversize file: %d %v", w.Code, v)
	}
	files, _ := v["files"].([]any)
	if len(files) != 2 {
		t.Fatalf("batch files: %v", v)
	}
	big, _ := files[0].(map[string]any)
	ok, _ := files[1].(map[string]any)
	if big["status"] != "error" || big["error"] != "File size limit exceeded" || big["filename"] != "big.bin" || big["fileId"] != nil {
		t.Errorf("the oversize file: %v", big)
	}
	if ok["status"] != "success" || !lcIDPattern.MatchString(fmt.Sprint(ok["fileId"])) {
		t.Errorf("the good file: %v", ok)
	}
	ss, err := svc.Sessions().Get(v["session_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ss.Workspace, "big.bin")); !os.IsNotExist(err) {
		t.Errorf("the oversize file was stored: %v", err)
	}

	// A batch where nothing fits.
	if w, v := post("/upload/batch", part{"file", "big.bin", strings.Repeat("x", 1001)}); w.Code != 200 || v["message"] != "error" || v["succeeded"] != float64(0) {
		t.Errorf("a batch with nothing stored: %d %v", w.Code, v)
	}

	// A file in a directory keeps it, and its name: the reply and the
	// listing call it in/data.txt, as the other doors do.
	w, v = post("/upload", part{"file", "in/data.txt", "d"})
	if w.Code != 200 {
		t.Fatalf("upload in a directory: %d %v", w.Code, v)
	}
	sid := v["session_id"].(string)
	ss, _ = svc.Sessions().Get(sid)
	if b, err := os.ReadFile(filepath.Join(ss.Workspace, "in", "data.txt")); err != nil || string(b) != "d" {
		t.Errorf("the file in its directory: %q %v", b, err)
	}
	if files, _ := v["files"].([]any); len(files) != 1 || files[0].(map[string]any)["filename"] != "in/data.txt" {
		t.Errorf("the upload reply's name of a file in a directory: %v", v)
	}
	lw := serve(h, req{method: "GET", path: "/files/" + sid + "?detail=full", hdr: key})
	var list []map[string]any
	if err := json.Unmarshal(lw.Body.Bytes(), &list); err != nil || len(list) != 1 ||
		list[0]["metadata"].(map[string]any)["original-filename"] != "in/data.txt" {
		t.Errorf("the listing's name of a file in a directory: %s", lw.Body.String())
	}

	// Past the workspace quota (700 bytes): quota_exceeded and 413, as
	// every door says it; the batch stores what fits and reports the rest
	// with the code.
	w, v = post("/upload/batch", part{"file", "a.bin", strings.Repeat("a", 500)}, part{"file", "b.bin", strings.Repeat("b", 400)})
	files, _ = v["files"].([]any)
	if w.Code != 200 || v["message"] != "partial_success" || len(files) != 2 {
		t.Fatalf("a batch past the quota: %d %v", w.Code, v)
	}
	if b := files[1].(map[string]any); b["status"] != "error" || b["code"] != "quota_exceeded" || !strings.Contains(fmt.Sprint(b["error"]), "SANDBOX_WORKSPACE_QUOTA") {
		t.Errorf("the file past the quota in a batch: %v", b)
	}
	ss, _ = svc.Sessions().Get(v["session_id"].(string))
	if b, err := os.ReadFile(filepath.Join(ss.Workspace, "a.bin")); err != nil || len(b) != 500 {
		t.Errorf("the file that fits: %d bytes, %v", len(b), err)
	}
	held := storage()
	w, v = post("/upload", part{"file", "a.bin", strings.Repeat("a", 500)}, part{"file", "b.bin", strings.Repeat("b", 400)})
	if w.Code != 413 || v["code"] != "quota_exceeded" || !strings.Contains(fmt.Sprint(v["error"]), "delete files") {
		t.Errorf("a single upload past the quota: %d %v", w.Code, v)
	}
	if after := storage(); after != held {
		t.Errorf("a refused upload left %d storage sessions behind", after-held)
	}

	before := storage()
	// Too many parts: 413, and nothing stays.
	parts := make([]part, 101)
	for i := range parts {
		parts[i] = part{"file", fmt.Sprintf("f%03d.txt", i), "x"}
	}
	if w, v := post("/upload/batch", parts...); w.Code != 413 || v["limit_bytes"] != float64(1000) {
		t.Errorf("101 parts: %d %v", w.Code, v)
	}
	// A single upload past the limit.
	if w, v := post("/upload", part{"file", "big.bin", strings.Repeat("x", 1001)}); w.Code != 413 || v["error"] != "File size limit exceeded" || v["code"] != "too_large" {
		t.Errorf("a single oversize upload: %d %v", w.Code, v)
	}
	// Files that fit one by one but not together.
	if w, v := post("/upload/batch", part{"file", "a", strings.Repeat("x", 600)}, part{"file", "b", strings.Repeat("y", 600)}); w.Code != 413 {
		t.Errorf("files past the limit together: %d %v", w.Code, v)
	}
	// No file part.
	if w, v := post("/upload", part{"entity_id", "", "x"}); w.Code != 400 || !strings.Contains(fmt.Sprint(v["error"]), "no file part") {
		t.Errorf("an upload without a file: %d %v", w.Code, v)
	}
	// A file that cannot be stored (a path outside /mnt/data).
	if w, v := post("/upload", part{"file", "../escape.txt", "x"}); w.Code != 400 || v["code"] != "invalid_path" {
		t.Errorf("an upload outside the workspace: %d %v", w.Code, v)
	}
	if after := storage(); after != before {
		t.Errorf("refused uploads left %d storage sessions behind", after-before)
	}
	// Not multipart at all.
	w = serve(h, req{method: "POST", path: "/upload", body: strings.NewReader("{}"), ctype: "application/json", hdr: key})
	if w.Code != 400 {
		t.Errorf("a JSON upload: %d", w.Code)
	}
}

// exec refuses a language it does not run before anything is made; health
// answers without credentials; an unknown route is 404 JSON.
func TestExecHealthAndRoutes(t *testing.T) {
	svc := newService(t, service.Config{})
	h := librechat.New(librechat.Config{APIKey: "k"}, svc)
	key := map[string]string{"X-API-Key": "k"}
	exec := func(body string) (*httptest.ResponseRecorder, map[string]any) {
		w := serve(h, req{method: "POST", path: "/exec", body: strings.NewReader(body), ctype: "application/json", hdr: key})
		return w, jsonOf(t, w)
	}
	w, v := exec(`{"lang":"cobol","code":"DISPLAY 'HI'."}`)
	if w.Code != 400 || v["error"] != "Unsupported language: cobol" {
		t.Errorf("an unknown language: %d %v", w.Code, v)
	}
	if _, ok := v["languages"]; !ok {
		t.Errorf("the refusal does not list the languages: %v", v)
	}
	if w, v := exec(`{"lang":`); w.Code != 400 || !strings.HasPrefix(fmt.Sprint(v["error"]), "invalid JSON body") {
		t.Errorf("a broken body: %d %v", w.Code, v)
	}
	if w := serve(h, req{method: "POST", path: "/exec", body: strings.NewReader(`{"lang":"py","code":"1"}`)}); w.Code != 401 {
		t.Errorf("exec without credentials: %d", w.Code)
	}
	if n := svc.Stats().Sessions; n != 0 {
		t.Errorf("refused execs opened %d sessions", n)
	}

	w = serve(h, req{method: "GET", path: "/health"})
	if v := jsonOf(t, w); w.Code != 200 || v["status"] != "ok" || v["running"] != float64(0) {
		t.Errorf("health: %d %v", w.Code, v)
	}
	for _, q := range []req{{method: "GET", path: "/nope"}, {method: "GET", path: "/exec", hdr: key}, {method: "PUT", path: "/files/sess_0123456789ab", hdr: key}} {
		w := serve(h, q)
		if v := jsonOf(t, w); w.Code != 404 || !strings.HasPrefix(fmt.Sprint(v["error"]), "no such route") {
			t.Errorf("%s %s: %d %v", q.method, q.path, w.Code, v)
		}
	}
}

// scripted is a backend whose data-session runs are played by the test
// instead of a sandbox: the code "list inputs" prints the workspace's files
// with their contents, writes out.txt and exits 3; any other run fails to
// start.
type scripted struct{ *backend.Native }

func (scripted) Start(box *backend.Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	if box == nil || len(spec.Argv) == 0 || spec.Argv[len(spec.Argv)-1] != "list inputs" {
		return nil, errors.New("no sandboxes in unit tests")
	}
	h := &played{done: make(chan struct{})}
	go func() {
		var out strings.Builder
		ents, _ := os.ReadDir(box.Workspace)
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(box.Workspace, e.Name()))
			fmt.Fprintf(&out, "%s=%s;", e.Name(), b)
		}
		_ = os.WriteFile(filepath.Join(box.Workspace, "out.txt"), []byte("made"), 0o644)
		sink(runner.Event{Seq: 1, Type: runner.EventReady})
		sink(runner.Event{Seq: 2, Type: runner.EventStdout, Data: []byte(out.String())})
		sink(runner.Event{Seq: 3, Type: runner.EventExit, ExitCode: 3, DurationMS: 7})
		close(h.done)
	}()
	return h, nil
}

// played is the handle of a scripted run.
type played struct{ done chan struct{} }

func (p *played) Write(b []byte) (int, error) { return len(b), nil }
func (p *played) CloseStdin() error           { return nil }
func (p *played) Resize(uint16, uint16) error { return nil }
func (p *played) Signal(syscall.Signal) error { return nil }
func (p *played) Cancel(bool)                 {}
func (p *played) Wait() runner.Event          { <-p.done; return runner.Event{} }
func (p *played) Done() <-chan struct{}       { return p.done }

// exec copies in the caller's own input files only (another principal's
// reference is noted on stderr, its file never copied), runs the code in a
// storage session of its own, and lists what the run made under that
// session, where download finds it for the caller alone.
func TestExecInputsAndOutputs(t *testing.T) {
	t.Parallel() // the runtimes' discovery takes a second
	rts, err := profiles.DiscoverRuntimes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if rt, ok := rts.Get("bash"); !ok || !rt.Available {
		t.Skip("no bash runtime on this host")
	}
	svc := newService(t, service.Config{Backend: scripted{&backend.Native{}}, Runtimes: rts})
	ed := edKey()
	h := librechat.New(librechat.Config{JWTKeys: []crypto.PublicKey{ed.Public()}}, svc)
	alice := map[string]string{"Authorization": "Bearer " + sign(t, jwt.SigningMethodEdDSA, ed, claims("alice"))}
	bob := map[string]string{"Authorization": "Bearer " + sign(t, jwt.SigningMethodEdDSA, ed, claims("bob"))}
	uploadAs := func(hdr map[string]string, name, content string) (sid, fid string) {
		body, ct := form(part{"file", name, content})
		w := serve(h, req{method: "POST", path: "/upload", body: body, ctype: ct, hdr: hdr})
		v := jsonOf(t, w)
		files, _ := v["files"].([]any)
		if w.Code != 200 || len(files) != 1 {
			t.Fatalf("upload %s: %d %v", name, w.Code, v)
		}
		return v["session_id"].(string), files[0].(map[string]any)["fileId"].(string)
	}
	aSid, aFid := uploadAs(alice, "in.csv", "a,b")
	bSid, bFid := uploadAs(bob, "bob.txt", "bob's secret")

	type execReply struct {
		SessionID string `json:"session_id"`
		Stdout    string `json:"stdout"`
		Stderr    string `json:"stderr"`
		Code      int    `json:"code"`
		Files     []struct {
			ID, Name, Path   string
			StorageSessionID string `json:"storage_session_id"`
		} `json:"files"`
	}
	exec := func(hdr map[string]string, body string) execReply {
		t.Helper()
		w := serve(h, req{method: "POST", path: "/exec", body: strings.NewReader(body), ctype: "application/json", hdr: hdr})
		var r execReply
		if err := json.Unmarshal(w.Body.Bytes(), &r); w.Code != 200 || err != nil {
			t.Fatalf("exec: %d %s", w.Code, w.Body.String())
		}
		return r
	}
	r := exec(alice, fmt.Sprintf(`{"lang":"bash","code":"list inputs","files":[
		{"id":%q,"session_id":%q,"name":"in.csv"},
		{"id":%q,"storage_session_id":%q,"name":"bob.txt"},
		{"id":%q,"storage_session_id":%q,"name":"/mnt/data/renamed.csv"},
		{"id":%q,"storage_session_id":%q,"name":"../escaped.csv"}]}`, aFid, aSid, bFid, bSid, aFid, aSid, aFid, aSid))
	if r.Stdout != "in.csv=a,b;renamed.csv=a,b;" {
		t.Errorf("the run's inputs: %q", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "srt-mcp: input file bob.txt ("+bSid+"/"+bFid+") is not available") || strings.Contains(r.Stdout+r.Stderr, "secret") {
		t.Errorf("another principal's input: stderr %q", r.Stderr)
	}
	if r.Code != 3 || r.SessionID == "" || r.SessionID == aSid {
		t.Errorf("the reply: %+v", r)
	}
	if len(r.Files) != 1 || r.Files[0].Name != "out.txt" || r.Files[0].Path != "/mnt/data/out.txt" || r.Files[0].StorageSessionID != r.SessionID || !lcIDPattern.MatchString(r.Files[0].ID) {
		t.Fatalf("the run's files: %+v", r.Files)
	}
	dl := "/download/" + r.SessionID + "/" + r.Files[0].ID
	if w := serve(h, req{method: "GET", path: dl, hdr: alice}); w.Code != 200 || w.Body.String() != "made" {
		t.Errorf("downloading the run's file: %d %q", w.Code, w.Body.String())
	}
	if w := serve(h, req{method: "GET", path: dl, hdr: bob}); w.Code != 404 {
		t.Errorf("bob downloading alice's run's file: %d", w.Code)
	}
	// The run's session lists its input under the input's own id.
	w := serve(h, req{method: "GET", path: "/files/" + r.SessionID, hdr: alice})
	if !strings.Contains(w.Body.String(), r.SessionID+"/"+aFid+".csv") {
		t.Errorf("the run's session does not list its input under its id: %s", w.Body.String())
	}

	// session_id names a session whose files come in: the caller's own only.
	if r := exec(alice, fmt.Sprintf(`{"lang":"bash","code":"list inputs","session_id":%q}`, bSid)); strings.Contains(r.Stdout, "bob") {
		t.Errorf("alice's exec naming bob's session: %q", r.Stdout)
	}
	if r := exec(alice, fmt.Sprintf(`{"lang":"bash","code":"list inputs","session_id":%q}`, aSid)); r.Stdout != "in.csv=a,b;" {
		t.Errorf("alice's exec naming her session: %q", r.Stdout)
	}
	// A sandbox that fails is 502, not a result.
	w = serve(h, req{method: "POST", path: "/exec", body: strings.NewReader(`{"lang":"bash","code":"anything else"}`), ctype: "application/json", hdr: alice})
	if v := jsonOf(t, w); w.Code != 502 || !strings.HasPrefix(fmt.Sprint(v["error"]), "the sandbox failed") {
		t.Errorf("a sandbox that does not start: %d %v", w.Code, v)
	}
}
