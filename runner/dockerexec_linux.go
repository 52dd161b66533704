package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// dockerExecMain is "srt-mcp __docker-exec CONFIG" inside a container.
// Failures before the command runs exit 125 (127 for a missing command,
// 126 for a working directory it cannot enter) with the reason on stderr.
func dockerExecMain() int {
	runtime.LockOSThread()
	fail := func(rc int, format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "srt-mcp: "+format+"\n", args...)
		return rc
	}
	if len(os.Args) < 3 {
		return fail(125, "__docker-exec is internal (srt-mcp serve --backend docker runs it)")
	}
	var cfg DockerExec
	if err := json.Unmarshal([]byte(os.Args[2]), &cfg); err != nil || cfg.V != DockerExecVersion || len(cfg.Argv) == 0 && !cfg.Wait {
		return fail(125, "__docker-exec: bad configuration (%v)", err)
	}
	env := os.Environ()
	if cfg.Wait {
		// What the exec stage's mode already does (the server's copy of
		// it is not readable to the container's users), done here too:
		// nothing of this user's reaches the stage's stdin through /proc.
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fail(125, "prctl(PR_SET_DUMPABLE): %v", err)
		}
		run, err := readDockerRun(os.Stdin)
		if err != nil {
			return fail(125, "__docker-exec: %v", err)
		}
		cfg, env = run, overEnv(env, run.Env)
		if cfg.NullStdin {
			null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fail(125, "/dev/null: %v", err)
			}
			if err := unix.Dup3(null, 0, 0); err != nil {
				return fail(125, "stdin: %v", err)
			}
			unix.Close(null)
		}
	}
	if cfg.Cgroup != "" {
		// Nothing runs until the server has this process in the run's
		// cgroup: every process the run starts is then its child there.
		deadline := time.Now().Add(20 * time.Second)
		for {
			b, _ := os.ReadFile("/proc/self/cgroup")
			if inCgroup(b, cfg.Cgroup, cfg.CgroupHierarchies) {
				break
			}
			if time.Now().After(deadline) {
				return fail(125, "the server did not set up this run (cgroup %s)", cfg.Cgroup)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// After the cgroup: the server has adopted the stage, and reports a
	// working directory it could not enter from the marker.
	if cfg.Cwd != "" {
		if err := unix.Chdir(cfg.Cwd); err != nil {
			mark(cfg.BadCwd)
			return fail(126, "cannot enter working directory %s: %v", cfg.Cwd, err)
		}
	}
	if err := applyRlimits(rlimits{FSize: cfg.FileSize, NoFile: cfg.OpenFiles}); err != nil {
		return fail(125, "%v", err)
	}
	path, code, err := lookPath(cfg.Argv[0], envValue(env, "PATH"))
	if err != nil {
		if code == ErrCodeNotFound {
			mark(cfg.NotFound)
		}
		if code == ErrCodeNotExecutable {
			return fail(126, "%v", err)
		}
		return fail(127, "%s", strings.TrimPrefix(err.Error(), "srt-mcp: "))
	}
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err := installSeccomp(seccompOpts{NoFallocate: cfg.NoFallocate}); err != nil {
		return fail(125, "seccomp: %v", err)
	}
	err = unix.Exec(path, cfg.Argv, env)
	return fail(126, "cannot execute %s: %v", cfg.Argv[0], err)
}

// mark creates the (empty) marker file path, unless path is "": the
// server finds it in the container's /tmp after the stage exited.
func mark(path string) {
	if path == "" {
		return
	}
	if fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err == nil {
		unix.Close(fd)
	}
}

// inCgroup reports whether a /proc/self/cgroup names the cgroup name in
// at least hierarchies of its lines (1 when 0).
func inCgroup(procCgroup []byte, name string, hierarchies int) bool {
	n := 0
	for _, line := range bytes.Split(procCgroup, []byte("\n")) {
		if bytes.HasSuffix(line, []byte("/"+name)) {
			n++
		}
	}
	return n >= max(1, hierarchies)
}
