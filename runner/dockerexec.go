package runner

import "encoding/json"

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
	// it does anything ("" does not wait).
	Cgroup string `json:"cgroup,omitempty"`
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
}

// Arg encodes the configuration as the stage's argument.
func (d DockerExec) Arg() string {
	d.V = DockerExecVersion
	b, _ := json.Marshal(d)
	return string(b)
}
