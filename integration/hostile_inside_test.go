package integration

// Hostile from the inside: untrusted code in a data session's sandbox
// attacking what the host does with what it wrote (names, deep trees,
// image headers, disk it takes behind the quota's back, races), another
// local user planting what a root server trusts, and a settings reload
// racing what already runs. Each TestHostileInside test but the
// regressions (marked) was seen failing on the tree after e6104d9 (up to
// 6c135c6, with work in progress), as root and, where it applies, as
// nobody.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

// decoded is a reply as the text a client shows: JSON (a whole body, or
// the data: lines of an event stream) decoded, so an escaped character in
// the JSON counts as the character it stands for.
func decoded(raw string) string {
	var out strings.Builder
	dec := func(s string) bool {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return false
		}
		fmt.Fprint(&out, v, "\n")
		return true
	}
	if dec(raw) {
		return out.String()
	}
	for _, line := range strings.Split(raw, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); !ok || !dec(d) {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// flat is a tool result's structured content as one string, decoded.
func flat(v map[string]any) string {
	b, _ := json.Marshal(v)
	return decoded(string(b))
}

// shownRaw lists the characters of s a terminal or a chat window would
// act on or hide instead of showing: controls (C0, DEL, C1), format
// characters (bidi controls, zero-width joiners, BOM, soft hyphen, tags,
// interlinear annotations) and the line and paragraph separators.
func shownRaw(s string) []string {
	seen := map[rune]bool{}
	var out []string
	for _, r := range s {
		if r == '\n' || r == '\t' || seen[r] {
			continue
		}
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			seen[r] = true
			out = append(out, fmt.Sprintf("U+%04X", r))
		}
	}
	return out
}

// Names a sandbox gives files reach no client raw, through any door:
// not only C0/C1 controls and bidi overrides (escaped since e6104d9), but
// the line and paragraph separators (U+2028/U+2029: a new line in many
// chat UIs and JS consoles), zero-width spaces and joiners, the BOM, the
// soft hyphen, interlinear annotations and Unicode tag characters (text
// invisible to the user that a model reads: "ASCII smuggling"). They were
// passed raw, and such names even got download URLs (they count as
// "fetchable").
func TestHostileInsideInvisibleNames(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"}, "--librechat-api-key", doorLCKey, "--librechat-rate-scale", "10", "--workspace-quota", "6M", "--workspace-fs", "dir")
	names := []string{"esc\x1b]0;T\x07.txt", "csi\u009b2J.txt", "rlo\u202etxt.exe", "iso\u2066x\u2069.txt",
		"ls\u2028line.txt", "ps\u2029para.txt", "zw\u200bsp.txt", "zwj\u200dj.txt", "bom\ufeffb.txt", "wj\u2060w.txt",
		"tag\U000e0049\U000e0047\U000e004e.txt", "shy\u00adh.txt", "ann\ufff9a\ufffbb.txt", "mvs\u180e.txt"}
	var py strings.Builder
	py.WriteString("import time\ntime.sleep(0.6)\n") // past the watch's first look: file events stream too
	for _, n := range names {
		fmt.Fprintf(&py, "open(%s, 'w').write('x')\n", strconv.QuoteToASCII(n))
	}
	py.WriteString("time.sleep(0.6)\nprint('made')\n")
	for _, dr := range doors(t, d) {
		t.Run(dr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := dr.run(ctx, t, py.String())
			if !strings.Contains(r.stdout, "made") {
				t.Fatalf("setup: %s", r.raw)
			}
			if bad := shownRaw(decoded(r.raw)); len(bad) > 0 {
				t.Errorf("%s shows characters of sandbox-made names raw: %v\n%q", dr.name, bad, decoded(r.raw))
			}
			if r.sessionID != "" && dr.name != "librechat" {
				v, _ := d.call("list_artifacts", map[string]any{"session_id": r.sessionID})
				if bad := shownRaw(flat(v)); len(bad) > 0 {
					t.Errorf("list_artifacts shows characters of sandbox-made names raw: %v\n%q", bad, flat(v))
				}
			}
		})
	}
	// The quota's message names the files it removed (none yet: see
	// TestHostileInsideQuotaRemovesOnlyWhatItMust; once it does, this
	// checks those names too).
	t.Run("quota_exceeded", func(t *testing.T) {
		c := connect(t, d.url)
		var big strings.Builder
		for _, n := range names {
			fmt.Fprintf(&big, "open(%s, 'wb').write(b'x' * (1 << 20))\n", strconv.QuoteToASCII("big-"+n))
		}
		v, _ := callTool(t, c, "run_python", map[string]any{"code": big.String()})
		if !strings.Contains(flat(v), "quota") {
			t.Fatalf("the run did not exceed the quota (the test's premise): %v", flat(v))
		}
		if bad := shownRaw(flat(v)); len(bad) > 0 {
			t.Errorf("the quota_exceeded reply shows characters of sandbox-made names raw: %v\n%q", bad, flat(v))
		}
	})
}

// A run that makes many files under a deep tree of long names (PATH_MAX
// allows 4 KiB, the walk goes deeper) cannot make the server build replies
// of its whole listing: 3000 files took a 44 MB text and 89 MB of
// structured content per run_python and per list_artifacts (the server
// at 1.2 GB), and the workspace may hold 100000 entries (~40 GB).
func TestHostileInsideLongNames(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice := keyClient(t, s.url, aliceToken)
	code := `
import os
os.makedirs("d"); os.chdir("d")
for depth in range(14):
    n = ("%02d" % depth) + "\x01" * 250
    os.mkdir(n); os.chdir(n)
for i in range(3000):
    open(("%05d" % i) + "\x02" * 200, "w").close()
print("made", len(os.getcwd()))
`
	const maxReply = 4 << 20
	v, isErr, text := toolText(t, alice, "run_python", map[string]any{"code": code})
	sid, _ := v["session_id"].(string)
	if isErr || sid == "" {
		t.Fatalf("run_python: %.2000s", text)
	}
	if n := len(text) + len(flat(v)); n > maxReply {
		t.Errorf("run_python's reply is %d bytes for 3000 files with long names (at most %d wanted: a listing is bounded)", n, maxReply)
	}
	v, _, text = toolText(t, alice, "list_artifacts", map[string]any{"session_id": sid})
	if n := len(text) + len(flat(v)); n > maxReply {
		t.Errorf("list_artifacts' reply is %d bytes (at most %d wanted)", n, maxReply)
	}
	t.Logf("server VmHWM %d MB", vmHWM(t, s.cmd.Process.Pid)>>20)
}

// The file events of a run count against --retained-output like its
// output: the budget charged each one 128 bytes whatever its path held, so
// with a 1M budget three finished runs held 60 MB (1000 events each, of
// names 15 levels deep, long and escaped), and the budget's metric said
// 257 KB.
func TestHostileInsideFileEventsBudget(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	s := startServe(t, "--backend", "native", "--retained-output", "1M")
	cs := goSDK(t, s.url, "")
	// The tree first (so that the next runs' watch holds its directories
	// from its first look), then runs that each add 1000 files at its
	// bottom while the watch looks.
	tree := `
import os
os.makedirs("deep"); os.chdir("deep")
for depth in range(15):
    n = ("%02d" % depth) + "\x01" * 250
    os.mkdir(n); os.chdir(n)
`
	files := `
import os, time
os.chdir("deep")
while True:
    sub = [e for e in os.listdir(".") if os.path.isdir(e)]
    if not sub:
        break
    os.chdir(sub[0])
time.sleep(0.5)
p = os.urandom(4).hex()
for i in range(1000):
    open(p + ("%04d" % i) + "\x02" * 200, "w").close()
time.sleep(1)
`
	v, isErr, text := sdkCall(t, cs, "create_session", map[string]any{"language": "python"})
	if isErr {
		t.Fatalf("create_session: %s", text)
	}
	sid := v["session_id"].(string)
	var ids []string
	for i, code := range []string{tree, files, files, files} {
		v, isErr, text = sdkCall(t, cs, "execute_code", map[string]any{"command": "exec python3 -c " + shellQuote(code), "session_id": sid})
		if isErr || v["exit_code"] != float64(0) {
			t.Fatalf("execute_code: %.2000s", text)
		}
		if i > 0 {
			ids = append(ids, fmt.Sprint(v["execution_id"]))
		}
	}
	held := 0
	for _, id := range ids {
		v, _, _ := sdkCall(t, cs, "get_execution_output", map[string]any{"execution_id": id})
		b, _ := json.Marshal(v)
		held += len(b)
	}
	if held > 4<<20 {
		t.Errorf("finished executions hand out %d bytes of events with --retained-output 1M: file events escape the budget", held)
	}
}

// A run stopped for the quota loses what it created largest first, only
// until the workspace fits again, and the reply names what went: every
// file the run made was removed (a 1 KB result with the 8 MB one that
// broke the quota) and the reply named none, because Session.Remove
// reports an error even when it removed the file (fileErr(rel, nil) is an
// internal_error), so the loop never counted a removal. The same error
// goes to every RemoveFile caller (LibreChat's DELETE audits a successful
// delete as internal_error).
func TestHostileInsideQuotaRemovesOnlyWhatItMust(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"}, "--workspace-quota", "6M", "--workspace-fs", "dir")
	v, _ := d.call("run_python", map[string]any{"code": `
open("result.txt", "w").write("keep me" * 100)
open("big.bin", "wb").write(b"x" * (8 << 20))
`})
	msg := fmt.Sprint(v["message"])
	if v["error"] != "quota_exceeded" {
		t.Fatalf("the run did not exceed the quota (the test's premise): %v", flat(v))
	}
	sid := fmt.Sprint(v["session_id"])
	list, _ := d.call("list_artifacts", map[string]any{"session_id": sid})
	if !strings.Contains(flat(list), "result.txt") {
		t.Errorf("the quota removed a 700-byte file as well as the 8 MB one that broke it: %v", flat(list))
	}
	if !strings.Contains(msg, "big.bin") {
		t.Errorf("the quota_exceeded message does not say what it removed: %q", msg)
	}
}

// cpuTicks is the CPU time (user and system, in clock ticks) pid used.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// A run's images are previewed within a bound of the server's CPU, not
// one full decode per image: 12 PNGs of 300 KB each (6324x6324, 16 bits
// per channel: just under the pixel cap, decoded to 320 MB each) cost the
// server 8-13 s of CPU and 0.6-1 GB of memory in one run_python reply; the
// quota lets a run write 3000 of them (an hour of the server's CPU).
func TestHostileInsidePreviewCPU(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice := keyClient(t, s.url, aliceToken)
	code := `
import zlib, struct
w = h = 6324
c = zlib.compressobj(9)
row = b"\x00" * (1 + w * 8)
body = b"".join(c.compress(row) for _ in range(h)) + c.flush()
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 6, 0, 0, 0)) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
for i in range(12):
    open("img%02d.png" % i, "wb").write(data)
print(len(data))
`
	before := cpuTicks(t, s.cmd.Process.Pid)
	v, isErr, text := toolText(t, alice, "run_python", map[string]any{"code": code})
	used := cpuTicks(t, s.cmd.Process.Pid) - before
	if isErr || v["exit_code"] != float64(0) {
		t.Fatalf("run_python: %.2000s", text)
	}
	if used > 400 {
		t.Errorf("one run_python reply cost the server %.1f s of CPU previewing 12 small image files (VmHWM %d MB)", float64(used)/100, vmHWM(t, s.cmd.Process.Pid)>>20)
	}
}

// secretFile is a file in the sandboxes' system view (only root may make
// one there) whose directory a test's reload denies.
func secretFile(t *testing.T, content string) (dir, file string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to place a file in the sandboxes' system view")
	}
	dir, err := os.MkdirTemp("/usr/local/share", "srt-mcp-test-secrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// settingsFile writes a settings file the way an editor replaces it.
type settingsFile string

func (p settingsFile) write(t *testing.T, body string) {
	t.Helper()
	tmp := string(p) + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, string(p)); err != nil {
		t.Fatal(err)
	}
}

func waitReload(t *testing.T, s *mcpServer, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(s.logs.String(), "settings file reloaded") < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload in 10 s:\n%s", s.logs.String())
		}
	}
}

// A narrowed ceiling reaches a workspace's interpreter that is idle, not
// only at its next cell: a thread a cell left running kept reading a
// path the reload denies, and the workspace's files carried what it read
// (a file written after the narrowing) to read_artifact, with no cell run
// since. The session stays open as long as it is used this way.
func TestHostileInsideReloadIdleKernel(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	secretDir, secret := secretFile(t, "old secret")
	cfg := settingsFile(filepath.Join(reachableTempDir(t), "srt-mcp.json"))
	cfg.write(t, `{"max-timeout": 120}`)
	s := startServe(t, "--backend", "native", "--config", string(cfg))
	d := &dataServer{mcpServer: s, t: t, c: connect(t, s.url)}
	sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
	d.wantErrorless("execute_code", map[string]any{"language": "python", "session_id": sid, "code": fmt.Sprintf(`
import threading, time
def spy():
    while True:
        try:
            data = open(%q).read()
        except OSError as e:
            data = "DENIED " + type(e).__name__
        open("/mnt/data/leak.txt", "w").write(data)
        time.sleep(0.2)
threading.Thread(target=spy, daemon=True).start()
`, secret)})
	cfg.write(t, fmt.Sprintf(`{"max-timeout": 120, "filesystem": {"denyRead": [%q]}}`, secretDir))
	waitReload(t, s, 1)
	if err := os.WriteFile(secret, []byte("new secret, written after the narrowing"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	v, isErr := d.call("read_artifact", map[string]any{"session_id": sid, "path": "leak.txt"})
	got, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v["content_base64"]))
	if !isErr && strings.Contains(string(got), "after the narrowing") {
		t.Errorf("an idle interpreter started before the narrowing still reads the denied path: leak.txt holds %q", got)
	}
}

// The state directory is the server's own: a root server given one that
// another user made (here 0777, owned by nobody: what an operator gets
// naming a path under /tmp that someone took first) took the download
// signing secret planted there (so the planter forges download URLs),
// wrote audit logs where the planter can remove them, and copied the
// planter's cache template into every new session (code in every tenant's
// sandboxes, on PYTHONPATH). It must refuse such a directory (as the
// runner's cache refuses one: owner, mode, ancestors), or at least trust
// nothing in it.
func TestHostileInsideStateDirOfAnotherUser(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: another user plants, a root server trusts")
	}
	const nobody = 65534
	state := filepath.Join(reachableTempDir(t), "state")
	asNobody := func(script string) {
		t.Helper()
		if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("as nobody: %v %s", err, out)
		}
	}
	if err := os.Mkdir(state, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	const planted = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	asNobody(fmt.Sprintf("cd %s && printf %s > file-secret && mkdir -m 777 workspaces", state, planted))

	srv, err := startServeMayRefuse(t, "--backend", "native", "--state-dir", state)
	if err != nil {
		t.Logf("the server refused the state directory: %v", err)
		return
	}
	d := &dataServer{mcpServer: srv, t: t, state: state}
	d.c = connect(t, d.url)
	sid := d.upload("", "a.txt", "hello")
	v := d.wantErrorless("list_artifacts", map[string]any{"session_id": sid})
	u, _ := url.Parse(v["artifacts"].([]any)[0].(map[string]any)["download_url"].(string))
	q := u.Query()
	m := hmac.New(sha256.New, []byte(planted))
	m.Write([]byte(sid + "/a.txt\n" + q.Get("exp") + "\n" + q.Get("inc")))
	if hex.EncodeToString(m.Sum(nil)) == q.Get("sig") {
		t.Errorf("the server signs download URLs with a file-secret another user planted in its state directory")
	}
	// The planter swaps in a cache template (its own directory: it may
	// rename the server's away) until a new session runs its code.
	for i := 0; i < 5; i++ {
		asNobody(fmt.Sprintf(`cd %s/workspaces && { mv .cache-template old-$$-%d 2>/dev/null; mkdir -p .cache-template/site-packages && echo 'open("/mnt/data/PLANTED", "w").write("x")' > .cache-template/site-packages/sitecustomize.py && chmod -R a+rX .cache-template; }`, state, i))
		c := connect(t, d.url)
		v, _ := callTool(t, c, "run_python", map[string]any{"code": "import os; print(sorted(os.listdir('/mnt/data')))"})
		if strings.Contains(fmt.Sprint(v["stdout"]), "PLANTED") {
			t.Errorf("code another user planted in the state directory ran in a new session's sandbox")
			break
		}
		time.Sleep(time.Second)
	}
}

// Regression (held): a sandbox reaches nothing beside its workspace in
// its session's directory (the door's metadata, the LibreChat index, the
// instance file): not through "..", not through the host path its mount
// table names; an index planted in the workspace is not the index.
func TestHostileInsideSessionDirUnreachable(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"}, "--librechat-api-key", doorLCKey)
	lc := d.base() + "/v1/librechat"
	hdr := map[string]string{"X-API-Key": doorLCKey}
	ctx := context.Background()
	code := `
import os, json
found = []
for p in ["/mnt/data/../librechat-index.json", "/mnt/data/../instance", "/mnt/librechat-index.json"]:
    try:
        os.stat(p); found.append(p)
    except OSError:
        pass
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if f[4] == "/mnt/data":
        host = f[3]
        for p in [host + "/../librechat-index.json", host + "/../instance", host]:
            try:
                os.stat(p); found.append(p)
            except OSError:
                pass
for p in ["/mnt/data/../librechat-index.json"]:
    try:
        open(p, "w").write("{}"); found.append("wrote " + p)
    except OSError:
        pass
open("/mnt/data/librechat-index.json", "w").write(json.dumps({"x": {"id": "x", "name": "../../../etc/passwd"}}))
open("/mnt/data/out.txt", "w").write("ok")
print("FOUND", found)
`
	status, v, raw := doorHTTP(ctx, t, "POST", lc+"/exec", map[string]any{"lang": "py", "code": code}, hdr)
	if status != 200 || !strings.Contains(fmt.Sprint(v["stdout"]), "FOUND []") {
		t.Errorf("the sandbox reached its session's directory: %d %s", status, raw)
	}
	sid, _ := v["session_id"].(string)
	req, _ := http.NewRequest("GET", lc+"/files/"+sid+"?detail=full", nil)
	req.Header.Set("X-API-Key", doorLCKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "passwd") || !strings.Contains(string(body), "out.txt") {
		t.Errorf("the session's file index after the run: %d %s", resp.StatusCode, body)
	}
}

// Regression (held): an interpreter left running races every host-side
// file operation, swapping a file and a directory for links (to the
// host's /etc/passwd and /tmp) as fast as it can; no read, download or
// upload follows one.
func TestHostileInsideRacingLinks(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"}, "--rate-limit", "1000")
	sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
	d.wantErrorless("execute_code", map[string]any{"language": "python", "session_id": sid, "code": `
import os, threading
os.chdir("/mnt/data")
os.makedirs("sub", exist_ok=True)
def tidy():
    for p in (".l", ".f", ".s"):
        try: os.unlink(p)
        except OSError: pass
    if os.path.islink("sub"):
        os.unlink("sub")
    if os.path.isdir(".realsub") and not os.path.lexists("sub"):
        os.rename(".realsub", "sub")
def flip():
    while True:
        try:
            os.symlink("/etc/passwd", ".l"); os.rename(".l", "flip.txt")
            open(".f", "w").write("plain"); os.rename(".f", "flip.txt")
            os.rename("sub", ".realsub"); os.symlink("/tmp", ".s"); os.rename(".s", "sub")
            os.unlink("sub"); os.rename(".realsub", "sub")
        except Exception:
            try: tidy()
            except Exception: pass
threading.Thread(target=flip, daemon=True).start()
`})
	inc := d.incarnation(sid)
	marker := "srt-mcp-race-" + randHex(6)
	read, refused, stored, failed := 0, 0, 0, 0
	for i := 0; i < 150; i++ {
		if v, isErr := d.call("read_artifact", map[string]any{"session_id": sid, "path": "flip.txt"}); !isErr {
			read++
			if b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v["content_base64"])); strings.Contains(string(b), "root:") {
				t.Fatalf("read_artifact followed a link: %q", b)
			}
		} else {
			refused++
		}
		if code, _, body := httpGet(t, signedURL(d.base(), sid, inc, "flip.txt", time.Now().Add(time.Hour).Unix())); code == 200 && strings.Contains(string(body), "root:") {
			t.Fatalf("a download followed a link: %q", body)
		}
		if _, isErr := d.call("upload_file", map[string]any{"session_id": sid, "filename": "sub/" + marker, "content_base64": "eA==", "overwrite": true}); isErr {
			failed++
		} else {
			stored++
		}
	}
	t.Logf("reads %d, refused %d (a link); uploads stored %d, refused %d", read, refused, stored, failed)
	if read == 0 || refused == 0 {
		t.Fatalf("the race did not happen (the test's premise): reads %d, refused %d", read, refused)
	}
	if _, err := os.Stat(filepath.Join("/tmp", marker)); err == nil {
		os.Remove(filepath.Join("/tmp", marker))
		t.Fatal("an upload went through a link into the host's /tmp")
	}
}

// Regression (held): a reload while the warm pool fills (its first
// interpreters starting under the old ceiling) reaches the sessions the
// pool hands out.
func TestHostileInsideReloadDuringPoolFill(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	secretDir, secret := secretFile(t, "host secret")
	cfg := settingsFile(filepath.Join(reachableTempDir(t), "srt-mcp.json"))
	cfg.write(t, `{"max-timeout": 120}`)
	s := startServe(t, "--backend", "native", "--config", string(cfg), "--warm-pool", "2")
	cfg.write(t, fmt.Sprintf(`{"max-timeout": 120, "filesystem": {"denyRead": [%q]}}`, secretDir))
	waitReload(t, s, 1)
	base := strings.TrimSuffix(s.url, "/mcp")
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, _, raw := httpGet(t, base+"/healthz"); strings.Contains(string(raw), `"warm_pool_ready":2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the warm pool did not fill")
		}
	}
	read := fmt.Sprintf("try:\n    print(open(%q).read())\nexcept OSError as e:\n    print('DENIED', type(e).__name__)", secret)
	for i := 0; i < 2; i++ {
		c := connect(t, s.url)
		v, _ := callTool(t, c, "execute_code", map[string]any{"code": read, "language": "python"})
		if strings.Contains(fmt.Sprint(v["stdout"]), "host secret") {
			t.Errorf("a warm-pool interpreter read a path the reload denied: %v", v)
		}
	}
}

// The settings file is trusted only where no one else can change it: a
// settings file the server checks (root's, not writable by others) in a
// directory another user owns could still be swapped by that user for
// another root-owned file there (here the operator's backup of the wider
// settings), and the server reloaded it: the narrowing undone.
func TestHostileInsideSettingsDirOfAnotherUser(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	secretDir, secret := secretFile(t, "host secret")
	dir := filepath.Join(reachableTempDir(t), "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := settingsFile(filepath.Join(dir, "srt-mcp.json"))
	if err := os.WriteFile(string(cfg)+".bak", []byte(`{"max-timeout": 120}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.write(t, fmt.Sprintf(`{"max-timeout": 120, "filesystem": {"denyRead": [%q]}}`, secretDir))
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	s, err := startServeMayRefuse(t, "--backend", "native", "--config", string(cfg))
	if err != nil {
		t.Logf("the server refused a settings file in another user's directory: %v", err)
		return
	}
	logs := s.logs
	c := connect(t, s.url)
	read := fmt.Sprintf("try:\n    print(open(%q).read())\nexcept OSError as e:\n    print('DENIED', type(e).__name__)", secret)
	if v, _ := callTool(t, c, "run_python", map[string]any{"code": read}); strings.Contains(fmt.Sprint(v["stdout"]), "host secret") {
		t.Fatalf("the secret is readable under the settings in force (the test's premise): %v", v)
	}
	if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "mv", string(cfg)+".bak", string(cfg)).CombinedOutput(); err != nil {
		t.Fatalf("as nobody: %v %s", err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "settings file re") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // reloaded, or refused
	}
	if v, _ := callTool(t, c, "run_python", map[string]any{"code": read}); strings.Contains(fmt.Sprint(v["stdout"]), "host secret") {
		t.Errorf("another user swapped the settings file (in a directory of theirs) and the server reloaded it: a denied path is readable again")
	}
}

// The proxy's decisions count against --retained-output like output: a
// denied CONNECT names its host, any length the proxy's header limit (1
// MB) lets through, and each decision became a violation event charged
// 128 bytes. 150 requests of 500 KB hosts (5 s of a sandbox's time) made
// one execution hold 75 MB with a 1M budget, the server at 730 MB; an
// execution keeps 20000 events (20 GB). The reply's stderr repeats every
// host in full too.
func TestHostileInsideViolationHosts(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"}, "--retained-output", "1M", "--allow-domain", "example.com")
	s := d.mcpServer
	cs := goSDK(t, s.url, "")
	code := `
import base64, os, socket, urllib.parse
u = urllib.parse.urlparse(os.environ.get("HTTPS_PROXY") or os.environ["https_proxy"])
auth = base64.b64encode((u.username + ":" + u.password).encode()).decode() if u.username else ""
for i in range(60):
    s = socket.create_connection((u.hostname, u.port))
    host = "h%d" % i + "a" * 500000 + ".com:443"
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\n\r\n" % (host, auth)).encode())
    s.recv(100)
    s.close()
print("sent")
`
	v, isErr, text := sdkCall(t, cs, "execute_code", map[string]any{"command": "exec python3 -c " + shellQuote(code),
		"sandbox_config": map[string]any{"network": map[string]any{"allowed_domains": []string{"example.com"}}}})
	if isErr || !strings.Contains(text, "sent") {
		t.Fatalf("execute_code: %.2000s", text)
	}
	reply := len(text)
	v, _, _ = sdkCall(t, cs, "get_execution_output", map[string]any{"execution_id": fmt.Sprint(v["execution_id"])})
	b, _ := json.Marshal(v)
	if len(b) > 4<<20 || reply > 4<<20 {
		t.Errorf("one execution holds %d bytes of events (its reply's text %d bytes) with --retained-output 1M: the proxy's decisions escape the budget (server VmHWM %d MB)",
			len(b), reply, vmHWM(t, s.cmd.Process.Pid)>>20)
	}
	// In a data session the run's audit line lists the decisions: kept
	// after the session, outside its quota.
	sid := d.upload("", "x.txt", "x")
	if _, isErr, text := sdkCall(t, cs, "execute_code", map[string]any{"command": "exec python3 -c " + shellQuote(code), "session_id": sid,
		"sandbox_config": map[string]any{"network": map[string]any{"allowed_domains": []string{"example.com"}}}}); isErr {
		t.Fatalf("execute_code in a session: %.2000s", text)
	}
	fi, err := os.Stat(filepath.Join(d.state, "audit", sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1<<20 {
		t.Errorf("the session's audit log (kept after it, outside its quota) took the run's denied hosts in full: %d bytes", fi.Size())
	}
}

// A path the sandbox named reaches clients made safe in the sweep's
// violations too (a write-protected name, such as .bashrc, that a run
// made in a writable host directory is removed and reported): the path
// carried ESC, BEL and U+202E raw in execute_code's events, as file names
// did before e6104d9.
func TestHostileInsideSweepViolationPath(t *testing.T) {
	parallel(t)
	dir := sbDir(t)
	s := startServe(t, "--backend", "native", "--allow-write", dir)
	cs := goSDK(t, s.url, "")
	code := fmt.Sprintf(`import os
d = os.path.join(%q, "e\x1b]0;PWNED\x07\u202e")
os.makedirs(d, exist_ok=True)
open(os.path.join(d, ".bashrc"), "w").write("x")
`, dir)
	v, isErr, text := sdkCall(t, cs, "execute_code", map[string]any{"command": "exec python3 -c " + shellQuote(code),
		"sandbox_config": map[string]any{"filesystem": map[string]any{"allow_write": []string{dir}}}})
	if isErr || !strings.Contains(flat(v), "PWNED") {
		t.Fatalf("execute_code: no violation naming the file (the test's premise): %s %s", text, flat(v))
	}
	if bad := shownRaw(flat(v) + text); len(bad) > 0 {
		t.Errorf("a violation's path shows characters of a sandbox-made name raw: %v\n%q", bad, flat(v))
	}
}
