package runner

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// ModeDockerExec is the exec stage of the Docker backend: each run in a
// session's container is `docker exec <mounted srt-mcp> __docker-exec
// <DockerExec JSON>`. It waits until the server has put it in a cgroup of
// its own (so that everything the run starts can be killed from the host,
// without a new exec, whatever it does), applies the same rlimits and
// seccomp filter as a native sandbox's exec stage, and execs the command.
const ModeDockerExec = "__docker-exec"

// DockerExecVersion is the version of DockerExec.
const DockerExecVersion = 1

// DockerExec is the exec stage's whole configuration (it carries no
// secret: the environment comes with the exec).
type DockerExec struct {
	V    int      `json:"v"`
	Argv []string `json:"argv"`
	// Cgroup is a name the stage waits to see in /proc/self/cgroup before
	// it does anything ("" does not wait), in CgroupHierarchies lines of it
	// (cgroup v1: the server moves it into each hierarchy in turn).
	Cgroup            string `json:"cgroup,omitempty"`
	CgroupHierarchies int    `json:"cgroup_n,omitempty"`
	// FileSize and OpenFiles are RLIMIT_FSIZE and RLIMIT_NOFILE (0: as is).
	FileSize  uint64 `json:"fsize,omitempty"`
	OpenFiles uint64 `json:"nofile,omitempty"`
	// NotFound is created (empty) when the command is not found, so that
	// the server can tell exit 127 of a missing command from the
	// command's own.
	NotFound string `json:"notfound,omitempty"`
	// NoFallocate: the seccomp filter refuses fallocate (see
	// Spec.NoFallocate).
	NoFallocate bool `json:"nofallocate,omitempty"`

	// Cwd is entered before anything else of the run; when it cannot be,
	// BadCwd is created (empty) and the stage exits 126, so that the
	// server tells a working directory that is not there from the
	// command's own exit.
	Cwd    string `json:"cwd,omitempty"`
	BadCwd string `json:"badcwd,omitempty"`

	// Wait: the stage was started ahead of its run (a session's next run
	// then skips the engine's start of a process, ~40 ms): it waits for
	// the run's configuration on its stdin (WriteDockerRun), which sets
	// the fields below as well; nothing else of this one is used.
	Wait bool `json:"wait,omitempty"`
	// Env is set over the stage's own environment (the container's and
	// PATH), and NullStdin gives the command /dev/null as its stdin: what
	// the exec's own options do in a run started for it.
	Env       []string `json:"env,omitempty"`
	NullStdin bool     `json:"nullstdin,omitempty"`
}

// maxDockerRunBytes bounds the configuration a waiting stage reads.
const maxDockerRunBytes = 1 << 20

// WriteDockerRun sends a waiting stage (DockerExec.Wait) its run: the
// configuration's length (4 bytes, big-endian), then the configuration,
// so that the stage reads exactly it and leaves the rest of its stdin to
// the command.
func WriteDockerRun(w io.Writer, d DockerExec) error {
	d.V, d.Wait = DockerExecVersion, false
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if len(b) > maxDockerRunBytes {
		return fmt.Errorf("the run's configuration is %d bytes, more than %d", len(b), maxDockerRunBytes)
	}
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err = w.Write(append(msg, b...))
	return err
}

// readDockerRun is WriteDockerRun's other end.
func readDockerRun(r io.Reader) (DockerExec, error) {
	var d DockerExec
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return d, fmt.Errorf("no run came: %v", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxDockerRunBytes {
		return d, fmt.Errorf("a run configuration of %d bytes", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return d, fmt.Errorf("the run's configuration was cut: %v", err)
	}
	if err := json.Unmarshal(b, &d); err != nil || d.V != DockerExecVersion || d.Wait || len(d.Argv) == 0 {
		return DockerExec{}, fmt.Errorf("bad run configuration (%v)", err)
	}
	return d, nil
}

// overEnv is env with each of over's variables set (replacing env's).
func overEnv(env, over []string) []string {
	out := make([]string, 0, len(env)+len(over))
	set := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// Arg encodes the configuration as the stage's argument.
func (d DockerExec) Arg() string {
	d.V = DockerExecVersion
	b, _ := json.Marshal(d)
	return string(b)
}
