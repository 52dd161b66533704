package service

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// newService is a service on a real session registry in a temporary state
// directory; no run starts a sandbox (the runner's and the integration
// suite's business): the backend refuses.
func newService(t *testing.T, cfg Config) *Service {
	t.Helper()
	reg, err := sessions.New(sessions.Config{StateDir: t.TempDir(), Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	mgr := executions.NewManager(executions.Config{})
	cfg.Sessions = reg
	cfg.Backend = noSandboxes{&backend.Native{}}
	if cfg.Runtimes == nil {
		cfg.Runtimes = &profiles.Runtimes{}
	}
	if cfg.Files == nil {
		cfg.Files = &Signer{Secret: []byte("unit-test-secret-0123456789abcdef"), BaseURL: "http://127.0.0.1:8080"}
	}
	s := New(cfg, mgr)
	t.Cleanup(func() {
		s.Shutdown()
		reg.Shutdown()
	})
	return s
}

// noSandboxes is a backend that starts nothing: runs are the runner's and
// the integration suite's to test.
type noSandboxes struct{ *backend.Native }

func (noSandboxes) Start(*backend.Box, runner.Spec, func(runner.Event)) (runner.Handle, error) {
	return nil, errors.New("no sandboxes in unit tests")
}

var (
	alice = Caller{Principal: "key:alice", Addr: "10.0.0.1"}
	bob   = Caller{Principal: "key:bob", Addr: "10.0.0.1"}
)

// Every handle answers its own principal only, through every call that
// takes it; nothing is adopted; a conversation is a name in its door's and
// principal's own namespace.
func TestOwnership(t *testing.T) {
	s := newService(t, Config{})
	w, created, err := s.OpenWorkspace(alice, "")
	if err != nil || !created {
		t.Fatal(err)
	}
	if _, err := s.WriteFile(alice, w, "upload_file", "a.txt", []byte("alice's"), false); err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		if !errs.Has(err, errs.SessionNotFound) {
			t.Errorf("%s of another principal's workspace: %v, want session_not_found", what, err)
		}
	}
	_, err = s.LookupWorkspace(bob, w.ID())
	notFound("LookupWorkspace", err)
	_, _, err = s.OpenWorkspace(bob, w.ID())
	notFound("OpenWorkspace", err)
	notFound("CloseWorkspace", s.CloseWorkspace(bob, w.ID()))
	_, err = s.Executions(bob, w.ID())
	notFound("Executions", err)
	if got, err := s.LookupWorkspace(alice, w.ID()); err != nil || got.ID() != w.ID() {
		t.Fatalf("alice's own: %v", err)
	}

	// Conversations: same name, another principal or door, another
	// workspace; never the id of a hash anyone can compute.
	c1, err := s.ConversationWorkspace(alice, "mcp", "c1", true)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.ConversationWorkspace(alice, "mcp", "c1", true); again.ID() != c1.ID() {
		t.Fatal("a conversation keeps its workspace")
	}
	b1, _ := s.ConversationWorkspace(bob, "mcp", "c1", true)
	p1, _ := s.ConversationWorkspace(alice, "playground", "c1", true)
	if b1.ID() == c1.ID() || p1.ID() == c1.ID() {
		t.Fatal("a conversation's name reached another principal's or door's workspace")
	}
	if none, err := s.ConversationWorkspace(bob, "mcp", "never", false); none != nil || err != nil {
		t.Fatalf("looking up a conversation must not make it: %v %v", none, err)
	}
	if err := s.CloseWorkspace(alice, c1.ID()); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.ConversationWorkspace(alice, "mcp", "c1", true); again.ID() == c1.ID() {
		t.Fatal("a closed conversation's workspace came back")
	}

	// Storage sessions are their maker's from the start.
	st, err := s.NewStorage(Caller{Principal: "librechat:apikey"}, time.Hour, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.LookupWorkspace(alice, st.ID())
	notFound("a LibreChat storage session's", err)
	if _, err := s.LookupWorkspace(Caller{Principal: "librechat:apikey"}, st.ID()); err != nil {
		t.Fatalf("the maker's lookup after another's: %v", err)
	}

	// Executions: another principal's id is not_found.
	if _, err := s.Execution(bob, "no-such-id"); !errs.Has(err, errs.NotFound) {
		t.Fatalf("an unknown execution: %v", err)
	}
	if _, err := s.Execution(bob, ""); !errs.Has(err, errs.InvalidArguments) {
		t.Fatalf("an empty execution id: %v", err)
	}
	if list, err := s.Executions(Caller{Principal: "anonymous"}, ""); err != nil || list != nil {
		t.Fatalf("an anonymous sessionless caller lists nothing: %v %v", list, err)
	}
}

// Files: written atomically within the quota and audited; a download URL
// names the incarnation; a name a sandbox made reaches a door escaped,
// without a URL.
func TestFiles(t *testing.T) {
	// The quota counts blocks.
	s := newService(t, Config{WorkspaceQuota: 64 << 10})
	w, _, _ := s.OpenWorkspace(alice, "")
	if _, err := s.WriteFile(alice, w, "upload_file", "../x", []byte("x"), false); !errs.Has(err, errs.InvalidPath) {
		t.Fatalf("traversal: %v", err)
	}
	if _, err := s.WriteFile(alice, w, "upload_file", "big.bin", make([]byte, 64<<10+1), false); !errs.Has(err, errs.QuotaExceeded) {
		t.Fatalf("past the quota: %v", err)
	}
	p, err := s.WriteFile(alice, w, "upload_file", "in/data.csv", []byte("a,b\n"), false)
	if err != nil || p != "/mnt/data/in/data.csv" {
		t.Fatalf("write: %q %v", p, err)
	}
	if _, err := s.WriteFile(alice, w, "upload_file", "in/data.csv", []byte("c"), false); !errs.Has(err, errs.FileExists) {
		t.Fatalf("no overwrite: %v", err)
	}
	data, f, err := s.ReadFile(alice, w, "read_artifact", "/mnt/data/in/data.csv", 0)
	if err != nil || string(data) != "a,b\n" || f.MIME != "text/csv" || !f.Fetchable {
		t.Fatalf("read: %q %+v %v", data, f, err)
	}
	u, err := url.Parse(f.URL)
	if err != nil || u.Query().Get("inc") != w.ss.Incarnation {
		t.Fatalf("the URL names no incarnation: %q", f.URL)
	}
	q := u.Query()
	name := strings.TrimPrefix(u.Path, "/files/"+w.ID()+"/")
	fh, _, err := s.OpenSigned(w.ID(), name, q.Get("exp"), q.Get("inc"), q.Get("sig"))
	if err != nil {
		t.Fatalf("the signed URL: %v", err)
	}
	fh.Close()
	if _, _, err := s.OpenSigned(w.ID(), name, q.Get("exp"), "0123456789abcdef", q.Get("sig")); !errs.Has(err, errs.Forbidden) {
		t.Fatalf("another incarnation under the same signature: %v", err)
	}
	// A file a sandbox named with escapes in it.
	if err := os.WriteFile(filepath.Join(w.ss.Workspace, "rt\x1b]0;X\x07.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	listed, more := s.Files(alice, w, "list_artifacts")
	if len(listed) != 2 || more != 0 {
		t.Fatalf("the listing: %+v (%d more)", listed, more)
	}
	for _, f := range listed {
		if strings.ContainsAny(f.Name+f.Path, "\x1b\x07") {
			t.Errorf("a listing carries a control character: %q", f.Name)
		}
		if strings.HasPrefix(f.Name, "rt") && (f.Fetchable || f.URL != "" || f.Name != `rt\x1b]0;X\x07.txt`) {
			t.Errorf("an escaped name: %+v", f)
		}
	}
	// The session closed, its URL serves nothing, even when the id is
	// opened again.
	if err := s.CloseWorkspace(alice, w.ID()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenWorkspace(bob, w.ID()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenSigned(w.ID(), name, q.Get("exp"), q.Get("inc"), q.Get("sig")); !errs.Has(err, errs.NotFound) {
		t.Fatalf("an old incarnation's URL: %v", err)
	}
	// Every operation was audited with its principal.
	log, _ := os.ReadFile(sessions.AuditPath(s.reg.StateDir(), w.ID()))
	for _, want := range []string{`"op":"upload_file"`, `"op":"read_artifact"`, `"op":"list_artifacts"`, `"principal":"key:alice"`, `"error":"quota_exceeded"`} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("the audit log lacks %s:\n%s", want, log)
		}
	}
}

// One upload loop, one budget, for every door.
func TestUploadForm(t *testing.T) {
	s := newService(t, Config{MaxUploadBytes: 100})
	w, _, _ := s.OpenWorkspace(alice, "")
	form := func(files map[string]string, fields int) *multipart.Reader {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for name, content := range files {
			fw, _ := mw.CreateFormFile("file", name)
			_, _ = io.WriteString(fw, content)
		}
		for i := 0; i < fields; i++ {
			_ = mw.WriteField("f", "v")
		}
		mw.Close()
		return multipart.NewReader(&b, mw.Boundary())
	}
	rep, err := s.UploadForm(alice, w, form(map[string]string{"a.txt": "aa", "dir/b.txt": "bb"}, 1), UploadOptions{Op: "test"})
	if err != nil || len(rep.Files) != 2 || rep.Fields["f"] != "v" {
		t.Fatalf("a form: %+v %v", rep, err)
	}
	if _, err := s.UploadForm(alice, w, form(nil, 40), UploadOptions{Op: "test"}); !errs.Has(err, errs.TooLarge) {
		t.Fatalf("40 fields: %v", err)
	}
	if _, err := s.UploadForm(alice, w, form(map[string]string{"big": strings.Repeat("x", 101)}, 0), UploadOptions{Op: "test"}); !errs.Has(err, errs.TooLarge) {
		t.Fatalf("a file past the limit: %v", err)
	}
	rep, err = s.UploadForm(alice, w, form(map[string]string{"big": strings.Repeat("x", 101), "ok.txt": "k", "../bad": "x"}, 0), UploadOptions{Op: "test", KeepGoing: true})
	if err != nil || len(rep.Files) != 3 {
		t.Fatalf("keep going: %+v %v", rep, err)
	}
	stored := 0
	for _, f := range rep.Files {
		if f.Err == nil {
			stored++
		}
	}
	if stored != 1 {
		t.Fatalf("keep going stores the good file only: %+v", rep.Files)
	}
	if _, err := s.UploadForm(alice, w, form(map[string]string{"a": strings.Repeat("x", 60), "b": strings.Repeat("y", 60)}, 0), UploadOptions{Op: "test"}); !errs.Has(err, errs.TooLarge) {
		t.Fatalf("files past the limit together: %v", err)
	}
}

// A call's sandbox may only narrow the operator's ceiling.
func TestCommandSpecCeiling(t *testing.T) {
	s := newService(t, Config{Ceiling: policy.Policy{Network: policy.Network{AllowedDomains: []string{"pypi.org"}},
		Limits: policy.Limits{Timeout: policy.Duration(time.Minute)}}})
	if _, err := s.CommandSpec(CommandArgs{Command: "true", Network: &policy.Network{AllowedDomains: []string{"evil.example"}}}); !errs.Has(err, errs.ExceedsCeiling) {
		t.Fatalf("a domain beyond the ceiling: %v", err)
	}
	long := 120.0
	if _, err := s.CommandSpec(CommandArgs{Command: "true", Timeout: &long}); !errs.Has(err, errs.ExceedsCeiling) {
		t.Fatalf("a timeout beyond the ceiling: %v", err)
	}
	if _, err := s.CommandSpec(CommandArgs{Command: "true", Cwd: "/etc"}); !errs.Has(err, errs.ExceedsCeiling) {
		t.Fatalf("a working directory beyond the ceiling: %v", err)
	}
	spec, err := s.CommandSpec(CommandArgs{Command: "true", Network: &policy.Network{AllowedDomains: []string{"pypi.org"}}})
	if err != nil || spec.Cwd != "/tmp" || len(spec.Policy.Network.AllowedDomains) != 1 {
		t.Fatalf("within the ceiling: %+v %v", spec, err)
	}
	// A reload narrows what the next call gets.
	s.SetCeiling(policy.Policy{Limits: policy.Limits{Timeout: policy.Duration(time.Minute)}})
	if _, err := s.CommandSpec(CommandArgs{Command: "true", Network: &policy.Network{AllowedDomains: []string{"pypi.org"}}}); !errs.Has(err, errs.ExceedsCeiling) {
		t.Fatalf("after the ceiling narrowed: %v", err)
	}
}

// Holds: per key (its share), per address for anonymous callers, in all.
func TestHolds(t *testing.T) {
	s := newService(t, Config{PrincipalShare: 0.5, Holds: map[string]HoldLimit{HoldMCPSession: {What: "MCP sessions", Global: 4, PerCaller: 3}}})
	var releases []func()
	hold := func(c Caller) error {
		r, err := s.Hold(HoldMCPSession, c)
		if err == nil {
			releases = append(releases, r)
		}
		return err
	}
	for i := 0; i < 2; i++ {
		if err := hold(alice); err != nil {
			t.Fatal(err)
		}
	}
	if err := hold(alice); !errs.Has(err, errs.TooManySessions) {
		t.Fatalf("alice past her share (2 of 4): %v", err)
	}
	if err := hold(bob); err != nil {
		t.Fatalf("bob from alice's address: %v", err)
	}
	anon := Caller{Principal: "anonymous", Addr: "10.0.0.9"}
	if err := hold(anon); err != nil {
		t.Fatal(err)
	}
	if err := hold(Caller{Principal: "anonymous", Addr: "10.0.0.8"}); !errs.Has(err, errs.TooManySessions) {
		t.Fatalf("past the global 4: %v", err)
	}
	releases[0]()
	releases[0]() // a second release changes nothing
	if err := hold(alice); err != nil {
		t.Fatalf("after alice freed one: %v", err)
	}
}
