package sessions

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newSessions(t *testing.T, cfg Config) *Registry {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func TestCleanName(t *testing.T) {
	good := map[string]string{
		"sales.csv":              "sales.csv",
		"in/sales.csv":           "in/sales.csv",
		"/mnt/data/chart.png":    "chart.png",
		"/mnt/data/out/a b.png":  "out/a b.png",
		"./x.txt":                "x.txt",
		"a//b.txt":               "a/b.txt",
		"données.csv":            "données.csv",
		"/mnt/data/./deep/f.txt": "deep/f.txt",
	}
	for in, want := range good {
		got, err := CleanName(in)
		if err != nil || got != want {
			t.Errorf("CleanName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                        "empty",
		"../etc/passwd":           "traversal",
		"a/../../b":               "traversal",
		"/mnt/data/../x":          "traversal",
		"/etc/passwd":             "inside /mnt/data",
		"/mnt/database/x":         "inside /mnt/data",
		"/mnt/data":               "names no file",
		".":                       "names no file",
		"a\x00b":                  "NUL",
		"a\\b":                    "backslash",
		"a\nb":                    "control",
		"a\x1bb.txt":              "control",
		"a\x7fb.txt":              "control",
		"a\u0085b.txt":            "control",
		"evil\u202etxt.exe":       "direction",
		"x\u2066y":                "direction",
		"\xff.csv":                "UTF-8",
		strings.Repeat("a", 2000): "1024",
	}
	for in, why := range bad {
		_, err := CleanName(in)
		wantCode(t, err, "invalid_path")
		if !strings.Contains(err.Error(), why) {
			t.Errorf("CleanName(%q): %v should say %q", in, err, why)
		}
	}
}

func TestSessionIDsCapAndClose(t *testing.T) {
	s := newSessions(t, Config{Max: 2})
	a, created, err := s.GetOrCreate("")
	if err != nil || !created || !sessionIDPattern.MatchString(a.ID) {
		t.Fatalf("new session: %+v %v %v", a, created, err)
	}
	if again, created, _ := s.GetOrCreate(a.ID); again != a || created {
		t.Fatal("GetOrCreate of an open id must return it")
	}
	_, _, err = s.GetOrCreate("sess_NOTHEX")
	wantCode(t, err, "invalid_session_id")
	if _, _, err := s.GetOrCreate("sess_0123456789ab"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.GetOrCreate("")
	wantCode(t, err, "max_sessions")
	if !strings.Contains(err.Error(), "Maximum 2 concurrent sessions") {
		t.Errorf("max_sessions message: %v", err)
	}
	if err := s.Close(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Dir); !os.IsNotExist(err) {
		t.Errorf("close must delete %s: %v", a.Dir, err)
	}
	wantCode(t, s.Close(a.ID), "session_not_found")
	_, err = s.Get(a.ID)
	wantCode(t, err, "session_not_found")
	wantCode(t, a.Acquire(), "session_not_found")
	if _, _, err := s.GetOrCreate(""); err != nil {
		t.Fatalf("a closed session frees its slot: %v", err)
	}
}

func TestSessionBusy(t *testing.T) {
	s := newSessions(t, Config{})
	ss, _, _ := s.GetOrCreate("")
	if err := ss.Acquire(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, ss.Acquire(), "session_busy")
	ss.Release()
	if err := ss.Acquire(); err != nil {
		t.Fatalf("after Release: %v", err)
	}
}

func TestSessionTTL(t *testing.T) {
	s := newSessions(t, Config{TTL: time.Minute})
	idle, _, _ := s.GetOrCreate("")
	busy, _, _ := s.GetOrCreate("")
	fresh, _, _ := s.GetOrCreate("")
	if err := busy.Acquire(); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Minute)
	fresh.mu.Lock()
	fresh.lastUsed = later.Add(-30 * time.Second)
	fresh.mu.Unlock()
	if n := s.Sweep(later); n != 1 {
		t.Fatalf("Sweep closed %d sessions, want 1 (the idle one)", n)
	}
	if _, err := s.Get(idle.ID); err == nil {
		t.Error("the idle session is still open")
	}
	if _, err := os.Stat(idle.Dir); !os.IsNotExist(err) {
		t.Errorf("the idle session's files remain: %v", err)
	}
	for _, ss := range []*Session{busy, fresh} {
		if _, err := s.Get(ss.ID); err != nil {
			t.Errorf("%s was closed: %v", ss.ID, err)
		}
	}
}

func TestSessionTTLLoop(t *testing.T) {
	s := newSessions(t, Config{TTL: 200 * time.Millisecond})
	ss, _, _ := s.GetOrCreate("")
	gone := func() bool { _, err := os.Stat(ss.Dir); return os.IsNotExist(err) }
	deadline := time.Now().Add(5 * time.Second)
	for (s.Count() > 0 || !gone()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s.Count() != 0 || !gone() {
		t.Fatalf("the cleanup loop did not close an idle session (open %d, workspace removed %v)", s.Count(), gone())
	}
}

func TestRestartCleansLeftovers(t *testing.T) {
	dir := t.TempDir()
	// A server killed with -9 leaves its instance directory, lock unheld,
	// and its workspaces.
	left := filepath.Join(dir, "workspaces", "0123456789abcdef0123456789abcdef", "data")
	if err := os.MkdirAll(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sessions", "deadbeefdeadbeef"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(left, "old.csv"), filepath.Join(dir, "sessions", "deadbeefdeadbeef", "lock")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(left), "instance"), []byte("deadbeefdeadbeef"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSessions(t, Config{StateDir: dir})
	if n, err := s.RemoveLeftovers(); n != 1 || err != nil {
		t.Errorf("RemoveLeftovers = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", "deadbeefdeadbeef")); !os.IsNotExist(err) {
		t.Errorf("a previous process's instance directory survived start-up: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(left)); !os.IsNotExist(err) {
		t.Errorf("a previous process's workspace survived start-up: %v", err)
	}
	if _, err := s.Get("sess_0123456789ab"); err == nil {
		t.Error("a leftover must not come back as an open session")
	}
	// A second live server on the same state directory leaves the first
	// one's sessions alone, and its own are separate.
	ss, _, _ := s.GetOrCreate("")
	other := newSessions(t, Config{StateDir: dir})
	if n, _ := other.RemoveLeftovers(); n != 0 {
		t.Errorf("the second server removed %d live sessions", n)
	}
	if _, err := os.Stat(ss.Workspace); err != nil {
		t.Fatalf("the second server touched the first one's workspace: %v", err)
	}
	if _, err := other.Get(ss.ID); err == nil {
		t.Error("one server sees another's session")
	}
	// A clean shutdown removes its own instance directory.
	s.Shutdown()
	if ents, _ := os.ReadDir(filepath.Join(dir, "sessions")); len(ents) != 1 {
		t.Errorf("after one shutdown: %v", ents)
	}
}

func TestWriteReadAtomic(t *testing.T) {
	s := newSessions(t, Config{})
	ss, _, _ := s.GetOrCreate("")
	p, err := ss.WriteFile("in/sales.csv", []byte("a,b\n1,2\n"), false)
	if err != nil || p != "/mnt/data/in/sales.csv" {
		t.Fatalf("WriteFile = %q, %v", p, err)
	}
	_, err = ss.WriteFile("in/sales.csv", []byte("new"), false)
	wantCode(t, err, "file_exists")
	data, info, err := ss.ReadFile("in/sales.csv", 0)
	if err != nil || string(data) != "a,b\n1,2\n" || info.MIME != "text/csv" || info.Size != 8 {
		t.Fatalf("file_exists must keep the old bytes: %q %+v %v", data, info, err)
	}
	if _, err := ss.WriteFile("in/sales.csv", []byte("new"), true); err != nil {
		t.Fatal(err)
	}
	if data, _, _ := ss.ReadFile("in/sales.csv", 0); string(data) != "new" {
		t.Fatalf("overwrite: %q", data)
	}
	ents, _ := os.ReadDir(filepath.Join(ss.Workspace, "in"))
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	_, _, err = ss.ReadFile("missing.png", 0)
	wantCode(t, err, "not_found")
	big := bytes.Repeat([]byte("x"), 2048)
	if _, err := ss.WriteFile("big.bin", big, false); err != nil {
		t.Fatal(err)
	}
	_, info, err = ss.ReadFile("big.bin", 1024)
	wantCode(t, err, "artifact_too_large")
	if info.Size != 2048 || !strings.Contains(err.Error(), "big.bin is 2KB, exceeds 1KB limit. Use download_url instead.") {
		t.Errorf("artifact_too_large: %+v %v", info, err)
	}
	_, err = ss.WriteFile("in", []byte("x"), true)
	wantCode(t, err, "invalid_path")
}

// Symlinks planted by code that ran in the session (it can write anything
// under /mnt/data) must not carry a later upload, read or download out of
// the workspace.
func TestPlantedSymlinks(t *testing.T) {
	s := newSessions(t, Config{})
	ss, _, _ := s.GetOrCreate("")
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := ss.Workspace
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(secret, filepath.Join(ws, "leak.txt")))
	must(os.Symlink(outside, filepath.Join(ws, "out")))
	must(os.Symlink("../../..", filepath.Join(ws, "up")))
	must(os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("ok"), 0o644))
	must(os.Symlink("ok.txt", filepath.Join(ws, "inside-link")))
	must(os.Symlink(".", filepath.Join(ws, "here")))

	for _, rel := range []string{"leak.txt", "out/secret", "up/etc/passwd", "inside-link", "here/ok.txt"} {
		data, _, err := ss.ReadFile(rel, 0)
		wantCode(t, err, "invalid_path")
		if len(data) > 0 {
			t.Errorf("read %s through a symlink: %q", rel, data)
		}
		if f, _, err := ss.Open(rel); err == nil {
			f.Close()
			t.Errorf("Open(%s) followed a symlink", rel)
		}
	}
	for _, rel := range []string{"leak.txt", "out/new.txt", "out/secret", "up/tmp/x", "here/new.txt"} {
		_, err := ss.WriteFile(rel, []byte("pwned"), true)
		wantCode(t, err, "invalid_path")
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret" {
		t.Fatalf("the host file was changed: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("files were written outside the workspace: %v", ents)
	}
	if l := ss.List(); len(l) != 1 || l[0].Filename != "ok.txt" {
		t.Errorf("List must show regular files only: %+v", l)
	}
	// A FIFO planted by earlier code must not hang a read.
	if err := mkfifo(filepath.Join(ws, "pipe")); err == nil {
		done := make(chan error, 1)
		go func() { _, _, err := ss.ReadFile("pipe", 0); done <- err }()
		select {
		case err := <-done:
			wantCode(t, err, "not_found")
		case <-time.After(3 * time.Second):
			t.Fatal("reading a FIFO hangs")
		}
	}
}

func TestArtifactsDiff(t *testing.T) {
	s := newSessions(t, Config{})
	ss, _, _ := s.GetOrCreate("")
	ws := ss.Workspace
	_ = os.WriteFile(filepath.Join(ws, "same.csv"), []byte("1"), 0o644)
	_ = os.WriteFile(filepath.Join(ws, "grows.csv"), []byte("1"), 0o644)
	_ = os.WriteFile(filepath.Join(ws, "touched.csv"), []byte("1"), 0o644)
	before := ss.Listing()
	_ = os.WriteFile(filepath.Join(ws, "grows.csv"), []byte("12"), 0o644)
	future := time.Now().Add(time.Hour)
	_ = os.Chtimes(filepath.Join(ws, "touched.csv"), future, future)
	_ = os.MkdirAll(filepath.Join(ws, "out"), 0o755)
	_ = os.WriteFile(filepath.Join(ws, "out", "new.png"), []byte("png"), 0o644)
	var got []string
	for _, f := range ss.Artifacts(before) {
		got = append(got, f.Path)
	}
	want := "/mnt/data/grows.csv /mnt/data/out/new.png /mnt/data/touched.csv"
	if strings.Join(got, " ") != want {
		t.Errorf("artifacts = %v, want %s", got, want)
	}
}

func TestMIMEType(t *testing.T) {
	for name, want := range map[string]string{
		"a.csv": "text/csv", "b.PNG": "image/png", "r.pdf": "application/pdf", "x.xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		"noext": "application/octet-stream", "c.json": "application/json",
	} {
		if got := MIMEType(name); got != want {
			t.Errorf("MIMEType(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestCacheTemplate(t *testing.T) {
	s := newSessions(t, Config{})
	before, _, _ := s.GetOrCreate("")
	tmp, err := s.MkdirTemp("cache-build-")
	if err != nil {
		t.Fatal(err)
	}
	build := filepath.Join(tmp, "cache")
	if err := os.MkdirAll(filepath.Join(build, "matplotlib"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(build, "matplotlib", "fontlist.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCacheTemplate(build); err != nil {
		t.Fatal(err)
	}
	ss, _, _ := s.GetOrCreate("")
	seeded := filepath.Join(ss.Cache, "matplotlib", "fontlist.json")
	if b, err := os.ReadFile(seeded); err != nil || string(b) != "{}" {
		t.Fatalf("a new session's cache starts from the template: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(before.Cache, "matplotlib")); !os.IsNotExist(err) {
		t.Errorf("an older session's cache changed: %v", err)
	}
	// A session's writes stay its own.
	if err := os.WriteFile(seeded, []byte("poisoned"), 0o600); err != nil {
		t.Fatal(err)
	}
	other, _, _ := s.GetOrCreate("")
	if b, _ := os.ReadFile(filepath.Join(other.Cache, "matplotlib", "fontlist.json")); string(b) != "{}" {
		t.Fatalf("one session's cache reached the next: %q", b)
	}
}

// As root, each session has its own host uid from the range, owning its
// workspace; no two open sessions share one.
func TestSessionUIDs(t *testing.T) {
	s := newSessions(t, Config{Max: 50, UIDs: &UIDRange{First: 3_000_000, Count: 1000}})
	seen := map[int]bool{}
	for i := 0; i < 20; i++ {
		ss, _, err := s.GetOrCreate("")
		if err != nil {
			t.Fatal(err)
		}
		u := ss.UID()
		if u < 3_000_000 || u >= 3_001_000 || seen[u] {
			t.Fatalf("session uid %d: outside the range or shared", u)
		}
		seen[u] = true
		if os.Geteuid() == 0 {
			var st syscall.Stat_t
			if err := syscall.Stat(ss.Workspace, &st); err != nil || int(st.Uid) != u || int(st.Gid) != u {
				t.Errorf("the workspace belongs to %d:%d, want %d", st.Uid, st.Gid, u)
			}
		}
		if BoxOf(ss).UID != u {
			t.Error("the session's box does not carry its uid")
		}
	}
}

// With a replica name, every minted id names the replica, and an id that
// names another replica is refused with a message saying so.
func TestReplicaIDs(t *testing.T) {
	s := newSessions(t, Config{Max: 3, Replica: "srt-1"})
	a, _, err := s.GetOrCreate("")
	if err != nil || !strings.HasPrefix(a.ID, "sess_srt-1_") || ReplicaOf(a.ID) != "srt-1" {
		t.Fatalf("minted id %q: %v", a.ID, err)
	}
	if got, err := s.Get(a.ID); err != nil || got != a {
		t.Fatalf("Get of a minted id: %v", err)
	}
	_, _, err = s.GetOrCreate("sess_srt-0_0123456789ab")
	wantCode(t, err, "session_not_found")
	if !strings.Contains(err.Error(), `belongs to replica "srt-0"`) {
		t.Errorf("a foreign replica's id: %v", err)
	}
	_, err = s.Get("sess_srt-0_0123456789ab")
	wantCode(t, err, "session_not_found")
	if _, _, err := s.GetOrCreate("sess_0123456789ab"); err != nil { // an id that names no replica
		t.Fatal(err)
	}
	for id, want := range map[string]string{"sess_0123456789ab": "", "sess_a_0123456789ab": "a", "sess_-a_0123456789ab": "", "sess_A_0123456789ab": ""} {
		if got := ReplicaOf(id); got != want {
			t.Errorf("ReplicaOf(%q) = %q, want %q", id, got, want)
		}
	}
	plain := newSessions(t, Config{Max: 1})
	_, _, err = plain.GetOrCreate("sess_srt-0_0123456789ab")
	wantCode(t, err, "session_not_found")
}

// A server killed between creating a MkdirTemp directory and writing its
// instance file left a directory that still names its owner: the next
// server removes it (it once kept it, as "a server creating it right now").
func TestRemoveLeftoversOfAKilledMkdirTemp(t *testing.T) {
	state := t.TempDir()
	s := newSessions(t, Config{StateDir: state})
	d, err := s.MkdirTemp("cache-build-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(filepath.Base(d), s.Instance()) {
		t.Fatalf("%s does not name its instance %s", d, s.Instance())
	}
	dead := filepath.Join(state, "workspaces", "cache-build-0123456789abcdef-42")
	if err := os.Mkdir(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RemoveLeftovers(); err != nil || n != 1 {
		t.Fatalf("RemoveLeftovers: %d %v", n, err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead server's half-made directory is still there: %v", err)
	}
	if _, err := os.Stat(d); err != nil {
		t.Errorf("this server's own directory was removed: %v", err)
	}
}

// A session belongs to the principal that opened it: another principal's
// Open or Lookup of its id is session_not_found (it is not adopted), a
// reopened id is a new incarnation, a principal's share of the cap holds,
// and an id naming this replica is the server's to mint, not a caller's.
func TestOpenBindsPrincipals(t *testing.T) {
	s := newSessions(t, Config{Max: 4, MaxPerPrincipal: 2, Replica: "r1"})
	a, created, err := s.Open("sess_0123456789ab", "key:alice")
	if err != nil || !created || a.Principal != "key:alice" || a.Incarnation == "" {
		t.Fatalf("alice's session: %+v %v %v", a, created, err)
	}
	if again, created, err := s.Open(a.ID, "key:alice"); err != nil || created || again != a {
		t.Fatalf("alice reopening her own id: %v %v", created, err)
	}
	_, _, err = s.Open(a.ID, "key:bob")
	wantCode(t, err, "session_not_found")
	_, err = s.Lookup(a.ID, "key:bob")
	wantCode(t, err, "session_not_found")
	if got, err := s.Lookup(a.ID, "key:alice"); err != nil || got != a {
		t.Fatalf("alice's lookup: %v", err)
	}
	if a.Principal != "key:alice" {
		t.Fatalf("bob's attempts changed the owner: %q", a.Principal)
	}
	// Closed and opened again under the same id: another incarnation.
	inc := a.Incarnation
	if err := s.Close(a.ID); err != nil {
		t.Fatal(err)
	}
	b, created, err := s.Open("sess_0123456789ab", "key:bob")
	if err != nil || !created || b.Principal != "key:bob" || b.Incarnation == inc {
		t.Fatalf("bob reopening the id: %+v %v (old incarnation %s)", b, err, inc)
	}
	// The share: bob holds at most 2 of the 4.
	if _, _, err := s.Open("", "key:bob"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Open("", "key:bob")
	wantCode(t, err, "max_sessions")
	if !strings.Contains(err.Error(), "share") {
		t.Errorf("the share's refusal should say so: %v", err)
	}
	if _, _, err := s.Open("", "key:carol"); err != nil {
		t.Fatalf("another principal while bob holds his share: %v", err)
	}
	// This replica's ids are minted, never named into being.
	_, _, err = s.Open("sess_r1_0123456789ab", "key:carol")
	wantCode(t, err, "session_not_found")
	// Storage and pooled sessions are bound too.
	st, err := s.CreateStorage(time.Hour, 10, 0, "librechat:apikey")
	if err != nil || st.Principal != "librechat:apikey" {
		t.Fatalf("storage: %+v %v", st, err)
	}
	_, err = s.Lookup(st.ID, "key:alice")
	wantCode(t, err, "session_not_found")
	p, err := s.CreatePooled()
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Lookup(p.ID, "")
	wantCode(t, err, "session_not_found") // waiting in the pool: nobody's yet
	if err := s.Claim(p, "key:carol"); err != nil || p.Principal != "key:carol" {
		t.Fatalf("claim: %v %q", err, p.Principal)
	}
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"chart.png":                     "chart.png",
		"données.csv":                   "données.csv",
		"rt\x1b]0;PWNED\x07\x1b[2J.txt": `rt\x1b]0;PWNED\x07\x1b[2J.txt`,
		"evil\u202etxt.exe":             `evil\u202etxt.exe`,
		"a\u0085b":                      `a\x85b`,
		"\xff.csv":                      `\xff.csv`,
	} {
		got, ok := SafeName(in)
		if got != want || ok != (in == want) {
			t.Errorf("SafeName(%q) = %q, %v; want %q", in, got, ok, want)
		}
		if strings.IndexFunc(got, func(r rune) bool { return r != '\\' && unsafeNameRune(r) }) >= 0 {
			t.Errorf("SafeName(%q) = %q still carries a control character", in, got)
		}
	}
}

// One principal's stored sessions are bounded: past its share its least
// recently used one makes room (it is never locked out by its own), and
// another principal keeps its place.
func TestStorageShare(t *testing.T) {
	s := newSessions(t, Config{})
	var mine []*Session
	for i := 0; i < 3; i++ {
		ss, err := s.CreateStorage(time.Hour, 4, 2, "librechat:jwt:u1")
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, ss)
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := s.Get(mine[0].ID); err == nil {
		t.Fatal("the least recently used of u1's stored sessions should have made room")
	}
	if _, err := s.Get(mine[2].ID); err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateStorage(time.Hour, 4, 2, "librechat:jwt:u2")
	if err != nil || other.Principal != "librechat:jwt:u2" {
		t.Fatalf("u2 while u1 holds its share: %v", err)
	}
	if err := mine[1].Acquire(); err != nil {
		t.Fatal(err)
	}
	if err := mine[2].Acquire(); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateStorage(time.Hour, 4, 2, "librechat:jwt:u1")
	wantCode(t, err, "max_sessions") // every one of u1's is in use: nothing of a run is closed under it
}
