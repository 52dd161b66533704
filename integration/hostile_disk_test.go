package integration

// A tenant's code filling the host's disk through its workspace. On a root
// server each workspace is an ext4 filesystem of its own, sized to the
// quota: every way of storing bytes there (fallocate, KEEP_SIZE, many
// small files, sparse files, hard links, files unlinked but kept open, the
// session's ~/.cache, a crowd of writers) ends in ENOSPC inside the run,
// the host stores at most the image, and the other tenants and the server
// go on writing.

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// workspaceFS is what /healthz says workspaces are: "filesystem" (each a
// filesystem of its own) or "directory" (a watched quota).
func workspaceFS(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	fs, _ := h["workspace_fs"].(string)
	if os.Geteuid() == 0 && fs != "filesystem" {
		t.Fatalf("a root server on this machine (loop devices, mkfs.ext4) must give each workspace a filesystem of its own; /healthz says %v", h)
	}
	return fs
}

// diskFillCode tries every way of storing more than the quota (64 MiB),
// emptying the workspace between them, and prints what each one met.
const diskFillCode = `
import ctypes, errno, os, shutil, subprocess, sys
MB = 1 << 20
open("keep.txt", "w").write("the user's file")
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
    for f in os.listdir("."):
        if f != "keep.txt":
            p = os.path.join(".", f)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
    shutil.rmtree(os.path.expanduser("~/.cache/fill"), ignore_errors=True)

def fallocate():
    for i in range(3):
        fd = os.open("fa%d.bin" % i, os.O_CREAT | os.O_WRONLY)
        try:
            os.posix_fallocate(fd, 0, 1000 * MB)
        finally:
            os.close(fd)
attempt("fallocate", fallocate)

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
def keep_size():
    fd = os.open("keep.bin", os.O_CREAT | os.O_WRONLY)
    try:
        for i in range(30):
            if libc.fallocate(fd, 1, i * 100 * MB, 100 * MB) != 0:  # FALLOC_FL_KEEP_SIZE
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)
attempt("keep_size", keep_size)

def small_files():
    os.mkdir("many")
    for i in range(40000):
        with open("many/%d" % i, "wb") as f:
            f.write(b"x" * 4096)
attempt("small_files", small_files)

def sparse():
    with open("sparse.bin", "wb") as f:
        f.truncate(512 * MB)
        for i in range(4000):
            f.seek(i * 128 * 1024)
            f.write(b"y" * 65536)
            f.flush()
attempt("sparse", sparse)

def hard_links():
    with open("one.bin", "wb") as f:
        f.write(b"z" * MB)
    for i in range(60000):
        os.link("one.bin", "link%d" % i)
    with open("after-links.bin", "wb") as f:
        for i in range(200):
            f.write(b"z" * MB)
attempt("hard_links", hard_links)

def unlinked_open():
    f = open("ghost.bin", "wb")
    os.remove("ghost.bin")
    try:
        for i in range(200):
            f.write(b"g" * MB)
            f.flush()
    finally:
        try:
            f.close()
        except OSError:
            pass
attempt("unlinked_open", unlinked_open)

def cache():
    d = os.path.expanduser("~/.cache/fill")
    os.makedirs(d, exist_ok=True)
    with open(d + "/big.bin", "wb") as f:
        for i in range(200):
            f.write(b"c" * MB)
            f.flush()
attempt("cache", cache)

def writers():
    procs = [subprocess.Popen([sys.executable, "-c",
        "import os\nf = open('w%d.bin' % os.getpid(), 'wb')\nfor i in range(40): f.write(b'w' * (1 << 20)); f.flush()"],
        stderr=subprocess.PIPE) for _ in range(12)]
    errs = [p.communicate()[1] for p in procs]
    if any(b"No space left" in e for e in errs):
        raise OSError(errno.ENOSPC, "a writer met ENOSPC")
attempt("writers", writers)
import json
print(json.dumps(res))
`

func TestHostileDiskFillPastQuota(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startData(t, backend, "--workspace-quota", "64M", "--exec-timeout-seconds", "120")
		if workspaceFS(t, d.url) != "filesystem" {
			t.Skip("workspaces are directories here (not root): the watched quota's bounds are TestHostileDirQuota*'s")
		}
		v, _ := d.call("run_python", map[string]any{"code": diskFillCode})
		sid, _ := v["session_id"].(string)
		var res map[string]string
		out, _ := v["stdout"].(string)
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil {
			t.Fatalf("the fill run did not finish: %.3000s", flat(v))
		}
		for _, class := range []string{"fallocate", "keep_size", "small_files", "sparse", "hard_links", "unlinked_open", "cache", "writers"} {
			if got := res[class]; got != "ENOSPC" && got != "EDQUOT" {
				t.Errorf("%s past a 64 MiB workspace: the program met %q, want ENOSPC from the workspace's filesystem", class, got)
			}
		}
		if e := v["error"]; e != nil {
			t.Errorf("the run was stopped (%v) instead of the program meeting a full disk: %.600s", e, flat(v))
		}
		// What the host stores for the session: the image, never more
		// than its size, whatever the run did.
		var images int
		_ = filepath.WalkDir(filepath.Join(d.state, "workspaces"), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.Name() != "image" {
				return nil
			}
			var st syscall.Stat_t
			if syscall.Lstat(p, &st) == nil {
				images++
				if alloc := st.Blocks * 512; alloc > 64<<20+40<<20 {
					t.Errorf("%s holds %d MiB on the host for a 64 MiB workspace", p, alloc>>20)
				}
			}
			return nil
		})
		if images == 0 {
			t.Fatal("no workspace image found under the state directory")
		}
		// The user's file is there; the session works; another session
		// writes.
		v, _ = d.call("run_python", map[string]any{"session_id": sid, "code": `print(open("keep.txt").read()); open("after.txt", "w").write("x" * 1000000); print("ok")`})
		if s, _ := v["stdout"].(string); !strings.Contains(s, "the user's file") || !strings.Contains(s, "ok") {
			t.Errorf("after the fill, the session lost the user's file or cannot write: %.600s", flat(v))
		}
		v, _ = d.call("run_python", map[string]any{"code": `open("other.bin", "wb").write(b"o" * (32 << 20)); print("ok")`})
		if s, _ := v["stdout"].(string); !strings.Contains(s, "ok") {
			t.Errorf("another session could not write 32 MiB after the fill: %.600s", flat(v))
		}
	})
}

// No host path in a sandbox's mount table: the workspace is a filesystem
// of its own, shown as its device and a path inside it.
func TestHostileDiskMountTableNamesNoHostPath(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startData(t, backend)
		if workspaceFS(t, d.url) != "filesystem" {
			t.Skip("workspaces are directories here (not root): bind mounts name their host directory")
		}
		v, _ := d.call("run_python", map[string]any{"code": `print(open("/proc/self/mountinfo").read())`})
		out, _ := v["stdout"].(string)
		if !strings.Contains(out, "/mnt/data") {
			t.Fatalf("no /mnt/data in the mount table: %.2000s", flat(v))
		}
		for _, leak := range []string{d.state, filepath.Base(filepath.Dir(filepath.Dir(d.state))), "workspaces"} {
			if strings.Contains(out, leak) {
				t.Errorf("the sandbox's mount table names %q:\n%s", leak, out)
			}
		}
	})
}
