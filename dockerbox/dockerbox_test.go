package dockerbox

// What the Docker backend decides without an engine: the specs it
// refuses, the container user, the image recipes and the image check, the
// exec stage's staging, the records Cleanup goes by, output cut at its
// cap, a run's end. The engine is the integration suite's (hostile_docker,
// image); here a fake answers the few API calls that matter.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// fakeEngine answers image inspections from images (name -> recipe label;
// absent: 404) and container removals (404 for ids in gone, 500 for ids
// in broken), and records the requests it got.
type fakeEngine struct {
	images map[string]string
	gone   map[string]bool
	broken map[string]bool

	mu   sync.Mutex
	reqs []string
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	path := regexp.MustCompile(`^/v[0-9.]+`).ReplaceAllString(r.URL.Path, "")
	notFound := func(what string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": what})
	}
	switch {
	case r.Method == "GET" && strings.HasPrefix(path, "/images/") && strings.HasSuffix(path, "/json"):
		name := strings.TrimSuffix(strings.TrimPrefix(path, "/images/"), "/json")
		label, ok := f.images[name]
		if !ok {
			notFound("No such image: " + name)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": "sha256:" + strings.Repeat("ab", 32),
			"Config": map[string]any{"Labels": map[string]string{LabelRecipe: label}}})
	case r.Method == "DELETE" && strings.HasPrefix(path, "/containers/"):
		id := strings.TrimPrefix(path, "/containers/")
		switch {
		case f.gone[id]:
			notFound("No such container: " + id)
		case f.broken[id]:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": "the engine is having a bad day"})
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		http.Error(w, "not faked: "+r.Method+" "+path, http.StatusNotImplemented)
	}
}

func (f *fakeEngine) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// engine serves f and returns a client of it.
func engine(t *testing.T, f *fakeEngine) *client.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cli, err := client.New(client.WithHost("tcp://"+srv.Listener.Addr().String()), client.WithAPIVersion(client.MaxAPIVersion))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func codeOf(err error) string {
	var e *runner.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// A spec a container cannot honour is refused before any engine is asked
// (the zero Backend has no client: reaching it would panic).
func TestStartRefuses(t *testing.T) {
	b := &Backend{}
	bx := &backend.Box{SessionID: "sess_0123456789ab", Workspace: "/nonexistent/data", Cache: "/nonexistent/cache"}
	sink := func(runner.Event) { t.Error("an event from a refused start") }
	for _, tc := range []struct {
		name string
		spec runner.Spec
		code string
	}{
		{"allow_read", runner.Spec{Argv: []string{"cat"}, Policy: policy.Policy{Filesystem: policy.Filesystem{AllowRead: []string{"/etc"}}}}, runner.ErrCodeInvalidPolicy},
		{"allow_write", runner.Spec{Argv: []string{"touch", "x"}, Policy: policy.Policy{Filesystem: policy.Filesystem{AllowWrite: []string{"/tmp"}}}}, runner.ErrCodeInvalidPolicy},
		{"no command", runner.Spec{}, runner.ErrCodeInvalidSpec},
		{"a report fd", runner.Spec{Argv: []string{"cc"}, Report: true}, runner.ErrCodeInvalidSpec},
	} {
		h, err := b.Start(bx, tc.spec, sink)
		if h != nil || codeOf(err) != tc.code {
			t.Errorf("%s: %v %v, want %s", tc.name, h, err, tc.code)
		}
	}
	// Without a session, a run needs the native sandbox.
	if h, err := b.Start(nil, runner.Spec{Argv: []string{"true"}}, sink); h != nil || codeOf(err) != runner.ErrCodeSandboxFailed {
		t.Errorf("a sessionless run without a native backend: %v %v", h, err)
	}
	// deny_read narrows, and is honoured (nothing is mounted but the
	// workspace): not refused by the spec check.
	if err := checkSpec(runner.Spec{Argv: []string{"true"}, Policy: policy.Policy{Filesystem: policy.Filesystem{DenyRead: []string{"/etc"}}}}); err != nil {
		t.Errorf("deny_read: %v", err)
	}
}

func TestSupportsAndUser(t *testing.T) {
	b := &Backend{cfg: Config{Image: "img:1"}, uid: 4242}
	for lang, want := range map[string]bool{"python": true, "bash": true, "javascript": false, "go": false, "": false, "Python": false} {
		ok, why := b.Supports(lang)
		if ok != want || (!ok && !strings.Contains(why, "--backend native")) || (ok && why != "") {
			t.Errorf("Supports(%q) = %v %q", lang, ok, why)
		}
	}
	if b.Name() != "docker" || b.Runs() != "docker image img:1" {
		t.Errorf("Name %q, Runs %q", b.Name(), b.Runs())
	}
	// A session's own uid, else the server's.
	if got := b.userOf(backend.Box{UID: 2_000_123}); got != "2000123:2000123" {
		t.Errorf("a session's uid: %q", got)
	}
	if got, want := b.userOf(backend.Box{}), fmt.Sprintf("4242:%d", os.Getegid()); got != want {
		t.Errorf("no uid of its own: %q, want %q", got, want)
	}
}

// The recipes: stable, distinct, and what CheckImage accepts.
func TestRecipes(t *testing.T) {
	known := KnownRecipes()
	if len(known) != 2 || known[0] == known[1] {
		t.Fatalf("KnownRecipes: %v", known)
	}
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	if h := RecipeHash(BuildOptions{Suite: "bookworm"}); h != known[0] || !hex16.MatchString(h) {
		t.Errorf("the registry-free recipe %q (known %v)", h, known)
	}
	if RecipeHash(BuildOptions{Suite: "bookworm", Tag: "x", Mirror: "http://m", Force: true}) != known[0] {
		t.Error("the recipe depends on more than the suite and the packages")
	}
	if RecipeHash(BuildOptions{Suite: "trixie"}) == known[0] {
		t.Error("another suite, the same recipe")
	}
	src, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if want := "dockerfile-" + hex.EncodeToString(sum[:8]); DockerfileRecipe() != want || known[1] != want {
		t.Errorf("DockerfileRecipe %q, want %q", DockerfileRecipe(), want)
	}
}

// CheckImage: an image srt-mcp built (either recipe), or one pinned by
// digest; anything else is refused with a code and the command that fixes
// it.
func TestCheckImage(t *testing.T) {
	f := &fakeEngine{images: map[string]string{
		"built:1":      KnownRecipes()[0],
		"dockerfile:1": KnownRecipes()[1],
		"foreign:1":    "someone-elses",
		"nolabel:1":    "",
		"pinned@sha256:" + strings.Repeat("cd", 32): "",
	}}
	cli := engine(t, f)
	ctx := context.Background()
	for image, code := range map[string]string{
		"built:1":      "",
		"dockerfile:1": "",
		"pinned@sha256:" + strings.Repeat("cd", 32): "",
		"foreign:1": ErrCodeImageUnpinned,
		"nolabel:1": ErrCodeImageUnpinned,
		"missing:1": ErrCodeImageMissing,
	} {
		err := CheckImage(ctx, cli, image)
		if codeOf(err) != code || (code == "" && err != nil) {
			t.Errorf("CheckImage(%s): %v, want %q", image, err, code)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "srt-mcp image build --tag "+image) {
			t.Errorf("CheckImage(%s) does not say how to build it: %v", image, err)
		}
	}
	// No engine at all.
	dead, err := client.New(client.WithHost("tcp://127.0.0.1:1"), client.WithAPIVersion(client.MaxAPIVersion))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	if err := CheckImage(ctx, dead, "built:1"); codeOf(err) != ErrCodeImageMissing {
		t.Errorf("an engine that does not answer: %v", err)
	}
}

// Cleanup removes the recorded containers of servers that are gone, and
// nothing else: not its own, not a live server's, not a container it has
// no record of, not one whose record is a link.
func TestCleanup(t *testing.T) {
	state := t.TempDir()
	reg, err := sessions.New(sessions.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Shutdown()
	other, err := sessions.New(sessions.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Shutdown()
	f := &fakeEngine{gone: map[string]bool{"c-gone": true}, broken: map[string]bool{"c-broken": true}}
	b := &Backend{cfg: Config{StateDir: state, Instance: reg.Instance()}, cli: engine(t, f)}
	if err := os.MkdirAll(b.recordDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	record := func(id, instance string) {
		if err := os.WriteFile(filepath.Join(b.recordDir(), id), []byte(instance), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	record("c-ours", reg.Instance())
	record("c-live", other.Instance())
	record("c-dead", "0123456789abcdef")
	record("c-dead2", "fedcba9876543210")
	record("c-gone", "0123456789abcdef")
	record("c-broken", "0123456789abcdef")
	// A record that is a link to a dead server's record.
	target := filepath.Join(t.TempDir(), "dead")
	if err := os.WriteFile(target, []byte("0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(b.recordDir(), "c-link")); err != nil {
		t.Fatal(err)
	}
	n, err := b.Cleanup(context.Background())
	if n != 2 {
		t.Errorf("Cleanup removed %d, want 2 (c-dead, c-dead2)", n)
	}
	if err == nil || !strings.Contains(err.Error(), "bad day") {
		t.Errorf("an engine failure is reported: %v", err)
	}
	left, _ := os.ReadDir(b.recordDir())
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if want := []string{"c-broken", "c-link", "c-live", "c-ours"}; !slices.Equal(names, want) {
		t.Errorf("records left: %v, want %v", names, want)
	}
	var deleted []string
	for _, r := range f.requests() {
		method, rest, _ := strings.Cut(r, " ")
		if method != "DELETE" {
			t.Errorf("Cleanup asked the engine %s", r)
			continue
		}
		p, q, _ := strings.Cut(rest, "?")
		deleted = append(deleted, p[strings.LastIndex(p, "/")+1:])
		if !strings.Contains(q, "force=1") || !strings.Contains(q, "v=1") {
			t.Errorf("a removal without force and volumes: %s", r)
		}
	}
	slices.Sort(deleted)
	if want := []string{"c-broken", "c-dead", "c-dead2", "c-gone"}; !slices.Equal(deleted, want) {
		t.Errorf("containers removed: %v, want %v", deleted, want)
	}
}

// A session closed before its container exists never gets one: Destroy
// marks it, and Container refuses without asking the engine.
func TestDestroyBeforeCreate(t *testing.T) {
	b := &Backend{containers: map[string]*box{}, creating: map[string]*sync.Mutex{}, closed: map[string]bool{}}
	bx := backend.Box{SessionID: "sess_0123456789ab", Workspace: "/state/workspaces/w1/data"}
	b.Release(bx) // nothing to release
	if err := b.Destroy(bx); err != nil {
		t.Fatal(err)
	}
	c, err := b.Container(context.Background(), bx)
	if c != nil || codeOf(err) != ErrCodeSessionClosed {
		t.Fatalf("a closed session's container: %v %v", c, err)
	}
	if _, err := b.Start(&bx, runner.Spec{Argv: []string{"true"}}, func(runner.Event) {}); codeOf(err) != ErrCodeSessionClosed {
		t.Errorf("a run in a closed session: %v", err)
	}
}

// stageBinary copies the exec stage into the state directory under its
// hash, once; a new build replaces the old; whatever stands at the name
// and is not a regular file is replaced, never written through.
func TestStageBinary(t *testing.T) {
	state, src := t.TempDir(), filepath.Join(t.TempDir(), "srt-mcp")
	if err := os.WriteFile(src, []byte("build one"), 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := stageBinary(state, src)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("build one"))
	if want := filepath.Join(state, "bin", "srt-mcp-exec-"+hex.EncodeToString(sum[:])[:16]); p != want {
		t.Fatalf("staged at %s, want %s", p, want)
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o711 { // runnable, not readable: see stageMode
		t.Fatalf("the staged binary: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "build one" {
		t.Errorf("the staged binary holds %q", b)
	}
	if di, _ := os.Stat(filepath.Join(state, "bin")); di == nil || di.Mode().Perm() != 0o711 {
		t.Errorf("the bin directory: %v", di)
	}
	if again, err := stageBinary(state, src); err != nil || again != p {
		t.Errorf("staging the same build again: %s %v", again, err)
	}
	// A new build: staged beside, the old one removed.
	if err := os.WriteFile(src, []byte("build two"), 0o700); err != nil {
		t.Fatal(err)
	}
	p2, err := stageBinary(state, src)
	if err != nil || p2 == p {
		t.Fatalf("a new build: %s %v", p2, err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("the old stage is still there: %v", err)
	}
	// A link planted at the next build's name is replaced, its target
	// untouched.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("victim"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum3 := sha256.Sum256([]byte("build three"))
	planted := filepath.Join(state, "bin", "srt-mcp-exec-"+hex.EncodeToString(sum3[:])[:16])
	if err := os.Symlink(victim, planted); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("build three"), 0o700); err != nil {
		t.Fatal(err)
	}
	p3, err := stageBinary(state, src)
	if err != nil || p3 != planted {
		t.Fatalf("staging over a link: %s %v", p3, err)
	}
	if fi, err := os.Lstat(p3); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the stage over a link is not a regular file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "victim" {
		t.Errorf("the link's target was written: %q", b)
	}
	ents, _ := os.ReadDir(filepath.Join(state, "bin"))
	if len(ents) != 1 {
		t.Errorf("left in bin: %v", ents)
	}
	if _, err := stageBinary(state, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("staging a missing binary")
	}
}

// drainJSON: the engine's progress as text, its error as an error.
func TestDrainJSON(t *testing.T) {
	var log bytes.Buffer
	err := drainJSON(strings.NewReader(`{"stream":"Step 1/3\n"}{"status":"Pulling fs layer"}{"aux":{"ID":"x"}}`), &log)
	if err != nil || log.String() != "Step 1/3\nPulling fs layer\n" {
		t.Errorf("a clean stream: %v %q", err, log.String())
	}
	log.Reset()
	err = drainJSON(strings.NewReader(`{"stream":"Step 2/3\n"}{"error":"pull access denied","errorDetail":{"message":"pull access denied"}}{"stream":"never\n"}`), &log)
	if err == nil || err.Error() != "pull access denied" || strings.Contains(log.String(), "never") {
		t.Errorf("a failed build: %v %q", err, log.String())
	}
	if err := drainJSON(strings.NewReader(`{"stream":`), &log); err == nil {
		t.Error("a truncated stream is no error")
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{512 << 20: "512M", 1 << 30: "1G", 4 << 30: "4G", 1536 << 20: "1536M", 0: "0M"} {
		if got := human(n); got != want {
			t.Errorf("human(%d) = %q, want %q", n, got, want)
		}
	}
}

// A run's output is cut at its cap per stream and the cut reported; its
// events are numbered; nothing follows its end.
func TestStreamsAndEnd(t *testing.T) {
	var mu sync.Mutex
	var got []runner.Event
	e := &execRun{max: 5, done: make(chan struct{}), sink: func(ev runner.Event) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}}
	out, errw := stream{e, runner.EventStdout}, stream{e, runner.EventStderr}
	for _, w := range []struct {
		s    stream
		data string
	}{{out, "abc"}, {out, "defgh"}, {errw, "12"}, {out, "ij"}, {errw, "3456789"}} {
		if n, err := w.s.Write([]byte(w.data)); n != len(w.data) || err != nil {
			t.Fatalf("Write(%q) = %d %v: a writer past the cap must not fail the copy", w.data, n, err)
		}
	}
	e.emit(runner.Event{Type: runner.EventExit, ExitCode: 3})
	e.emit(runner.Event{Type: runner.EventStdout, Data: []byte("late")})
	e.emit(runner.Event{Type: runner.EventExit, ExitCode: 4})
	select {
	case <-e.Done():
	default:
		t.Fatal("the run's end did not close Done")
	}
	var stdout, stderr string
	for i, ev := range got {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
		switch ev.Type {
		case runner.EventStdout:
			stdout += string(ev.Data)
		case runner.EventStderr:
			stderr += string(ev.Data)
		}
	}
	if stdout != "abcde" || stderr != "12345" {
		t.Errorf("stdout %q, stderr %q: want each cut at 5 bytes", stdout, stderr)
	}
	if last := got[len(got)-1]; last.Type != runner.EventExit || last.ExitCode != 3 {
		t.Errorf("the last event: %+v", last)
	}
	if end := e.Wait(); end.ExitCode != 3 {
		t.Errorf("Wait: %+v", end)
	}
	if !e.trunc[runner.EventStdout] || !e.trunc[runner.EventStderr] {
		t.Errorf("truncation not recorded: %v", e.trunc)
	}
}

// processTree finds a process's descendants through /proc (a server that
// cannot make cgroups kills a run by its tree).
func TestProcessTree(t *testing.T) {
	if processTree(0) != nil || processTree(-1) != nil {
		t.Error("no tree for pid 0 or below")
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() {
		for _, p := range processTree(cmd.Process.Pid) {
			if p != os.Getpid() {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		_ = cmd.Wait()
	}()
	var tree []int
	for i := 0; i < 200; i++ { // the shell forks its sleep
		if tree = processTree(os.Getpid()); len(tree) >= 3 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(tree) < 3 || tree[0] != os.Getpid() || !slices.Contains(tree, cmd.Process.Pid) {
		t.Fatalf("the test's tree %v lacks its shell %d and its sleep", tree, cmd.Process.Pid)
	}
	sub := processTree(cmd.Process.Pid)
	if len(sub) != 2 || sub[0] != cmd.Process.Pid || slices.Contains(sub, os.Getpid()) {
		t.Errorf("the shell's tree: %v", sub)
	}
}

// finishRootfs adds the image's user and /mnt/data and drops the docs
// (root: it chowns).
func TestFinishRootfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("finishRootfs chowns to the image's user: root only")
	}
	root := t.TempDir()
	for p, content := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
		"usr/share/doc/python3/copyright": "c", "var/lib/apt/lists/x_Packages": "p",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := finishRootfs(root); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.HasSuffix(string(b), "\nsandbox:x:1000:1000:srt-mcp sandbox:/tmp/home:/bin/sh\n") {
		t.Errorf("passwd: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/group")); !strings.HasSuffix(string(b), "\nsandbox:x:1000:\n") {
		t.Errorf("group: %q", b)
	}
	for _, d := range []string{"mnt/data", "tmp/home"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st == nil || st.Uid != imageUID || st.Gid != imageUID || !fi.IsDir() {
			t.Errorf("%s: %v %v, want a directory of %d:%d", d, st, err, imageUID, imageUID)
		}
	}
	for _, d := range []string{"usr/share/doc", "var/lib/apt/lists"} {
		ents, err := os.ReadDir(filepath.Join(root, d))
		if err != nil || len(ents) != 0 {
			t.Errorf("%s: %v %v, want kept and empty", d, ents, err)
		}
	}
	if err := finishRootfs(t.TempDir()); err == nil {
		t.Error("a root without /etc/passwd")
	}
}
