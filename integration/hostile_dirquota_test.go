//go:build linux

package integration

// A tenant's code filling the host's disk through a directory workspace
// (a server without root, or --workspace-fs dir): no filesystem bounds it,
// a watch enforces --workspace-quota. Each test is one way of storing
// bytes the watch once did not count or did not stop, measured on the host
// (what the state directory's files take on disk, st_blocks), as root
// with --workspace-fs dir and as an unprivileged user.

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const dirQuota = 64 << 20

// startDirQuota starts a server whose workspaces are directories with a
// 64 MiB watched quota.
func startDirQuota(t *testing.T, backend []string, extra ...string) *dataServer {
	t.Helper()
	d := startData(t, backend, append([]string{"--workspace-quota", "64M", "--workspace-fs", "dir", "--exec-timeout-seconds", "60"}, extra...)...)
	if fs := workspaceFSDir(t, d.url); fs != "directory" {
		t.Fatalf("--workspace-fs dir: /healthz says workspaces are %q", fs)
	}
	return d
}

// workspaceFSDir is workspaceFS without its root check (a root server
// told --workspace-fs dir has directories).
func workspaceFSDir(t *testing.T, url string) string {
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
	s, _ := h["workspace_fs"].(string)
	return s
}

// allocated is what the files under dir take on the host's disk.
func allocated(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// wantHostWithin fails unless the state directory's workspaces take at
// most the quota and slack on the host.
func wantHostWithin(t *testing.T, d *dataServer, what string, slack int64) {
	t.Helper()
	if n := allocated(filepath.Join(d.state, "workspaces")); n > dirQuota+slack {
		t.Errorf("%s: the workspaces hold %d MiB on the host for a 64 MiB quota", what, n>>20)
	}
}

// A file's blocks count, not its size: blocks preallocated past its size
// (FALLOC_FL_KEEP_SIZE: 20 x 100 MiB were kept, never counted, until the
// session ended), and the blocks of tiny files and empty directories
// (45,000 of each took 353 MiB, counted 44 KiB, never stopped).
func TestHostileDirQuotaCountsBlocks(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startDirQuota(t, backend)
		v, _ := d.call("run_python", map[string]any{"code": `
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
res = "ok"
for i in range(20):
    fd = os.open("ks%d" % i, os.O_CREAT | os.O_WRONLY, 0o644)
    r = libc.fallocate(fd, 1, 0, 100 << 20)  # FALLOC_FL_KEEP_SIZE
    os.close(fd)
    if r != 0:
        res = errno.errorcode.get(ctypes.get_errno())
        break
time.sleep(2)
print("keep_size:", res)
`})
		sid, _ := v["session_id"].(string)
		t.Logf("KEEP_SIZE: %v %.300s %.300s", v["error"], v["message"], v["stdout"])
		if out := fmt.Sprint(v["stdout"]); v["error"] != "quota_exceeded" && !strings.Contains(out, "EOPNOTSUPP") && !strings.Contains(out, "ENOTSUP") {
			t.Errorf("20 x 100 MiB preallocated (KEEP_SIZE) in a 64 MiB workspace: neither stopped nor refused: %.800s", flat(v))
		}
		wantHostWithin(t, d, "after KEEP_SIZE", 4<<20)

		start := time.Now()
		v, _ = d.call("run_python", map[string]any{"session_id": sid, "code": `
import os
for i in range(40000):
    os.mkdir("d%d" % i)
    with open("d%d/f" % i, "wb") as f:
        f.write(b"1")
print("made 40000 directories and 1-byte files")
`})
		t.Logf("small files (%s): %v %.300s", time.Since(start), v["error"], v["message"])
		if v["error"] != "quota_exceeded" {
			t.Errorf("40,000 empty directories and 1-byte files in a 64 MiB workspace were not stopped (%s): %.600s", time.Since(start), flat(v))
		}
		wantHostWithin(t, d, "after the small files and directories", 4<<20)
		// The session works, within its quota.
		v, _ = d.call("run_python", map[string]any{"session_id": sid, "code": `open("after.txt", "w").write("x" * 1000); print("ok")`})
		if s, _ := v["stdout"].(string); !strings.Contains(s, "ok") {
			t.Errorf("after the quota stop the session does not work: %.600s", flat(v))
		}
	})
}

// The session's cache (the sandbox's ~/.cache, where its packages go)
// counts: 300 MiB there were never counted (the flag promises "/mnt/data
// and ~/.cache together").
func TestHostileDirQuotaCountsCache(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startDirQuota(t, backend)
		v, _ := d.call("run_python", map[string]any{"code": `
import os, time
d = os.path.expanduser("~/.cache/fill")
os.makedirs(d, exist_ok=True)
buf = b"c" * (1 << 20)
for i in range(5):
    with open("%s/blob%d" % (d, i), "wb") as f:
        for _ in range(60):
            f.write(buf)
time.sleep(1)
print("wrote 300 MiB to ~/.cache")
`})
		msg := fmt.Sprint(v["message"])
		t.Logf("cache: %v %.400s", v["error"], msg)
		if v["error"] != "quota_exceeded" {
			t.Fatalf("300 MiB into ~/.cache of a 64 MiB workspace was not stopped: %.800s", flat(v))
		}
		if !strings.Contains(msg, "~/.cache/fill/blob") {
			t.Errorf("the reply does not say it removed the cache's files: %q", msg)
		}
		wantHostWithin(t, d, "after 300 MiB into ~/.cache", 4<<20)
	})
}

// The session's cache outlives a run on every backend: on Docker the
// container's /tmp is emptied after each run, and that emptied the
// session's ~/.cache mount too (its installed packages) and detached it,
// so later runs wrote ~/.cache to the container's /tmp, where no quota
// counted it and the next run lost it.
func TestDirQuotaCacheKeptBetweenRuns(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startDirQuota(t, backend)
		v, _ := d.call("run_python", map[string]any{"code": `
import os
open(os.path.expanduser("~/.cache/kept.txt"), "w").write("kept")
open("/tmp/scratch.txt", "w").write("scratch")
print("written")
`})
		sid, _ := v["session_id"].(string)
		for i := 0; i < 2; i++ {
			v, _ = d.call("run_python", map[string]any{"session_id": sid, "code": `
import os
print(open(os.path.expanduser("~/.cache/kept.txt")).read(), os.path.exists("/tmp/scratch.txt"), os.path.ismount(os.path.expanduser("~/.cache")) or "same-fs")
`})
			if s, _ := v["stdout"].(string); !strings.HasPrefix(s, "kept False") {
				t.Fatalf("run %d after the one that wrote ~/.cache/kept.txt: %.600s", i+2, flat(v))
			}
		}
	})
}

// hostPeak samples what the state directory's workspaces hold on the host
// every 20 ms until stop is called, and returns the largest.
func hostPeak(d *dataServer) (stop func() int64) {
	done := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var max int64
		for {
			if n := allocated(filepath.Join(d.state, "workspaces")); n > max {
				max = n
			}
			select {
			case <-done:
				peak <- max
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int64 { close(done); return <-peak }
}

// fallocateProbe prints what fallocate(2) answers in /mnt/data and
// whether posix_fallocate still gives a file its blocks.
const fallocateProbe = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fd = os.open("/mnt/data/probe.bin", os.O_CREAT | os.O_WRONLY, 0o644)
r = libc.fallocate(fd, 0, 0, 1 << 20)
print("fallocate:", "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno()))
os.ftruncate(fd, 0)
os.posix_fallocate(fd, 0, 4 << 20)
st = os.fstat(fd)
print("posix_fallocate: size", st.st_size, "blocks", st.st_blocks * 512)
os.close(fd)
os.remove("/mnt/data/probe.bin")
`

// A directory workspace's sandbox refuses fallocate (EOPNOTSUPP), in a
// fresh run and in the session's interpreter alike: blocks reserved in
// one call landed faster than the watch looks (40 x 60 MiB with
// posix_fallocate: 2.4 GB on the host before the first check).
// glibc's posix_fallocate then writes the blocks, which RLIMIT_FSIZE
// bounds (a file at most what the quota leaves) and the watch sees.
func TestHostileDirQuotaRefusesFallocate(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startDirQuota(t, backend)
		sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
		for _, how := range []map[string]any{
			{"tool": "run_python", "session_id": sid, "code": fallocateProbe},
			{"tool": "execute_code", "session_id": sid, "language": "python", "code": fallocateProbe},
		} {
			tool := how["tool"].(string)
			delete(how, "tool")
			v, _ := d.call(tool, how)
			out, _ := v["stdout"].(string)
			refused := strings.Contains(out, "fallocate: EOPNOTSUPP") || strings.Contains(out, "fallocate: ENOTSUP") // one errno, two names
			if !refused || !strings.Contains(out, "posix_fallocate: size 4194304 blocks 4194304") {
				t.Errorf("%s: want fallocate refused (EOPNOTSUPP) and posix_fallocate writing 4 MiB instead: %.800s", tool, flat(v))
			}
		}
		stop := hostPeak(d)
		v, _ := d.call("run_python", map[string]any{"session_id": sid, "code": `
import os, time
errs = set()
for i in range(40):
    fd = os.open("fa%d" % i, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.posix_fallocate(fd, 0, 60 << 20)
    except OSError as e:
        errs.add(e.errno)
    os.close(fd)
time.sleep(1)
print("errors", sorted(errs))
`})
		time.Sleep(200 * time.Millisecond)
		peak := stop()
		t.Logf("40 x posix_fallocate(60 MiB): peak %d MiB on the host; %v %.300s %.200s", peak>>20, v["error"], v["message"], v["stdout"])
		if peak > 1<<30 {
			t.Errorf("40 x posix_fallocate(60 MiB) in a 64 MiB workspace: the host held %d MiB at the peak", peak>>20)
		}
		if v["error"] != "quota_exceeded" {
			t.Errorf("40 x posix_fallocate(60 MiB) in a 64 MiB workspace was not stopped: %.600s", flat(v))
		}
		wantHostWithin(t, d, "after 40 x posix_fallocate", 4<<20)
	})
}

// A session's interpreter writes no file larger than the quota: it ran
// with the operator's max_file_size_bytes (1 GiB) while a fresh run of the
// same session had what the quota leaves, so one cell wrote 1 GiB files.
func TestHostileDirQuotaKernelFileSize(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startDirQuota(t, backend)
		sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
		v := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": `import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE))`})
		if s, _ := v["stdout"].(string); strings.TrimSpace(s) != fmt.Sprintf("(%d, %d)", dirQuota, dirQuota) {
			t.Errorf("the interpreter's RLIMIT_FSIZE under a 64 MiB quota: %q", s)
		}
	})
}

// A cell returns and a thread it started writes on: between cells the
// watch looks every 250 ms like during a run, and past the quota it stops
// the session's interpreter and removes what was written since the cell
// ended; the next cell says why. Before, a check every 2 s that needed
// two growing samples stopped the interpreter ~3 s later and removed
// nothing: 1.9 GiB stayed on the host until the session ended.
func TestHostileDirQuotaBetweenCells(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startDirQuota(t, backend)
		sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
		d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": `open("/mnt/data/mine.txt", "w").write("the user's file"); keep = 42`})
		stop := hostPeak(d)
		v := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python", "code": `
import threading, time
def bg():
    time.sleep(0.5)  # after the cell returned
    buf = b"x" * (1 << 20)
    for i in range(30):
        try:
            with open("/mnt/data/bg%d" % i, "wb") as f:
                for _ in range(60):
                    f.write(buf)
        except OSError:
            pass
threading.Thread(target=bg, daemon=True).start()
print("the cell returns; a thread writes on")
`})
		returned := time.Now()
		if v["error"] != nil {
			t.Fatalf("the cell itself: %.600s", flat(v))
		}
		var settled time.Duration
		for time.Since(returned) < 8*time.Second {
			time.Sleep(100 * time.Millisecond)
			if time.Since(returned) > time.Second && allocated(filepath.Join(d.state, "workspaces")) <= dirQuota+4<<20 {
				settled = time.Since(returned)
				break
			}
		}
		time.Sleep(time.Second) // whatever still writes, writes now
		peak := stop()
		t.Logf("between cells: host peak %d MiB, back within the quota %s after the cell returned", peak>>20, settled)
		if settled == 0 {
			t.Errorf("8 s after the cell returned, the workspaces hold %d MiB on the host for a 64 MiB quota", allocated(filepath.Join(d.state, "workspaces"))>>20)
		}
		wantHostWithin(t, d, "a second after", 4<<20)
		if peak > 1<<30 {
			t.Errorf("a thread writing between cells took the host to %d MiB for a 64 MiB workspace", peak>>20)
		}
		v, _ = d.call("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": `import os; print(open("/mnt/data/mine.txt").read(), "keep" in globals())`})
		note, _ := v["note"].(string)
		t.Logf("the next cell: %.500s", note)
		if s, _ := v["stdout"].(string); !strings.Contains(s, "the user's file False") {
			t.Errorf("the next cell: want the user's file kept and a new interpreter: %.600s", flat(v))
		}
		if !strings.Contains(note, "between cells") || !strings.Contains(note, "64.0 MiB quota") || !strings.Contains(note, "bg") {
			t.Errorf("the next cell does not say why its interpreter restarted and what was removed: %q", note)
		}
	})
}

// A run starts from what the last run left (no second walk of the
// workspace and the cache): what came in between counts as the run's,
// except a file uploaded in between, which a removal for the quota never
// takes.
func TestDirQuotaUploadBetweenRunsKept(t *testing.T) {
	parallel(t)
	d := startDirQuota(t, []string{"--backend", "native"}, "--workspace-quota", "1M")
	sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
	d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python", "code": `x = 1`})
	d.upload(sid, "upload.bin", strings.Repeat("u", 600<<10))
	v, _ := d.call("execute_code", map[string]any{"session_id": sid, "language": "python",
		"code": `open("/mnt/data/cell.bin", "wb").write(b"c" * (500 << 10))`})
	msg := fmt.Sprint(v["error"])
	if !strings.Contains(msg, "quota_exceeded") || !strings.Contains(msg, "cell.bin") || strings.Contains(msg, "upload.bin") {
		t.Errorf("500 KiB written after a 600 KiB upload into a 1 MiB workspace: want the cell's file removed, not the upload: %.600s", flat(v))
	}
	list, _ := d.call("list_artifacts", map[string]any{"session_id": sid})
	if !strings.Contains(flat(list), "upload.bin") {
		t.Errorf("the upload was removed: %.600s", flat(list))
	}
}
