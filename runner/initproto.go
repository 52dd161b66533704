package runner

// The start-up protocol between the runner (outside) and the sandbox side
// (inside bwrap). bwrap passes these fds through to the command it starts:
//
//	3  SOCK_SEQPACKET socketpair end: one JSON initMsg per datagram, fds in
//	   SCM_RIGHTS alongside
//	4  pipe: one initConfig (the sandbox's shape), JSON, then EOF
//	5  bwrap's own --json-status-fd (PID 1 of the sandbox, its exit code)
//	6  the srt-mcp binary, read-only: bwrap executes /proc/self/fd/6, so the
//	   binary is never mounted and its host path never shows inside
//	7- the sources of the bind mounts, O_PATH descriptors the runner opened
//	   after checking the plan (bwrap's --bind-fd; it closes them once
//	   mounted)
//
// bwrap's own stdio is its diagnostics, read by the runner. The command's
// stdio, its report pipe and the run itself (argv, environment, working
// directory, rlimits) come only with the go message: a sandbox is built
// and verified before it knows what it will run, so that one built ahead
// of a call (a pre-started sandbox, prestart.go) and one built for it are
// the same sandbox.
//
// The sandbox side is the exec stage ("srt-mcp __srt-exec", pid 2 under
// bwrap's PID 1). Where Landlock is missing it is started by our own PID 1
// ("srt-mcp __srt-init", bwrap --as-pid-1), which relays the same messages.
//
//	runner                                          exec stage (pid 2)
//	  | fd 4: initConfig, EOF -----------------------> |
//	  |                                                | verify: own /proc, user
//	  |                                                | and net namespaces, no
//	  |                                                | capabilities, read-only /,
//	  |                                                | each mounted object
//	  | <------ verified + SCM_RIGHTS[exec-status r,   | (or error)
//	  |       PTY master, proxy listeners if asked] -- |
//	  |  compare /proc/<pid1>/ns/* with our own:       | a pre-started sandbox
//	  |  every namespace must differ                   | records its state
//	  |            ... (a pre-started sandbox waits here for its call)
//	  | check (a pre-started sandbox only) ----------> | compare the state with
//	  | <----------------------- unchanged, or error -- | the one recorded
//	  | go + SCM_RIGHTS[runConfig pipe r, ----------->  |
//	  |   stdin, stdout, stderr unless a PTY,          | as root on v1: move own
//	  |   report w if asked, cgroup v1 tasks files     | thread into the
//	  |   as root on v1]                               | sandbox's cgroups;
//	  |  runConfig pipe: the run, JSON, EOF            |
//	  |                                                | Landlock scope, rlimits,
//	  |                                                | ctty, close fds,
//	  |                                                | no_new_privs, seccomp,
//	  |                                                | execve(command)
//	  | exec-status pipe: EOF = exec'd, or one error    |
//	  |                                                |
//	  | bwrap exits with the command's status (128+N for signal N); PID 1
//	  | kills everything left in the sandbox when the command exits.
//
// The exec-status pipe's write end is close-on-exec and held only by the
// exec stage, so EOF on it means execve succeeded.

const (
	initMsgVerified = "verified"
	initMsgGo       = "go"
	// check asks a pre-started sandbox's stage whether the sandbox is
	// still in the state it recorded; it answers unchanged, or an error.
	initMsgCheck     = "check"
	initMsgUnchanged = "unchanged"
	initMsgError     = "error"
)

// initMsg is every message of the start-up protocol.
type initMsg struct {
	T       string `json:"t"`
	Code    string `json:"code,omitempty"` // error
	Message string `json:"message,omitempty"`
}

// runConfig is the run a sandbox was started for, or claimed by: sent with
// the go message (through a pipe that comes with it), never at start.
type runConfig struct {
	Argv   []string `json:"argv"`
	Direct []string `json:"direct,omitempty"` // Spec.Direct
	Env    []string `json:"env"`
	Cwd    string   `json:"cwd"`
	Limits rlimits  `json:"limits"`
	// Report: a pipe to the runner comes with the go message after the
	// stdio, and becomes the command's fd 3 (Spec.Report).
	Report bool `json:"report,omitempty"`
	// NoFallocate: the seccomp filter refuses fallocate (Spec.NoFallocate).
	NoFallocate bool `json:"no_fallocate,omitempty"`
}

// initConfig is what the sandbox side needs to know from its start: the
// sandbox's shape. On Linux the embedded runConfig is empty on the wire
// (it comes with go); elsewhere it is the whole run.
type initConfig struct {
	runConfig
	PTY  bool   `json:"pty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Landlock is the Landlock ABI to scope the command with (0: none; then
	// our own non-dumpable PID 1 is what keeps /proc/1 out of reach).
	Landlock int `json:"landlock,omitempty"`
	// PID is the pid the exec stage must have in the sandbox.
	PID int `json:"pid"`
	// CgroupTasks is how many cgroup v1 tasks files (opened by a root
	// runner) come with the go message: the exec stage writes 0 to each,
	// which moves its own thread, the one that execs the command, into the
	// sandbox's cgroups (cgroup_linux.go), and refuses to run the command
	// when it gets another number of files or a write fails.
	CgroupTasks int `json:"cgroup_tasks,omitempty"`
	// Proxy asks the exec stage to open the HTTP (3128) and SOCKS5 (1080)
	// proxy listeners on the sandbox's loopback and hand them to the runner.
	Proxy bool `json:"proxy,omitempty"`
	// Mounted are the objects the runner mounted by descriptor: the exec
	// stage checks, from inside, that each path (reached without following
	// a link) is that very object before the command runs.
	Mounted []mountedObject `json:"mounted,omitempty"`
	// OwnerWrites: a writable root is mounted idmapped, the sandbox writing
	// as its owner (seccompOpts.OwnerWrites; the umask is 022 or stricter).
	OwnerWrites bool `json:"owner_writes,omitempty"`
	// Prestarted: the sandbox is started ahead of its call and may wait
	// for it. Once verified the stage records the sandbox's state (its
	// mounts, the objects at every mount's destination, the files of its
	// private directories, its processes, its sockets) and at go checks
	// that nothing changed it meanwhile (prestart_linux.go).
	Prestarted bool `json:"prestarted,omitempty"`
	// Dsts are the destinations of every mount of the plan; Points those
	// that are mount points (binds, tmpfs, masks, /proc, /dev): the exec
	// stage checks each is one in its mount table, so that a host
	// directory renamed while bwrap built the sandbox (which takes the
	// mounts under it along, unmasking what a mask covered) is found.
	// Private are the sandbox's own directories (its root, its tmpfs
	// mounts and /dev), recorded with Dsts in a pre-started sandbox's state.
	Dsts    []string `json:"dsts,omitempty"`
	Points  []string `json:"points,omitempty"`
	Private []string `json:"private,omitempty"`
}

// mountedObject is one bind mount's destination and the identity of the
// source the runner opened for it.
type mountedObject struct {
	Src string `json:"-"` // the host path opened (the runner's to know)
	Dst string `json:"dst"`
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// rlimits are applied by the exec stage, inside the user namespace, so that
// RLIMIT_NPROC counts only this sandbox's processes. Zero means unchanged.
type rlimits struct {
	NProc  uint64 `json:"nproc,omitempty"`
	AS     uint64 `json:"as,omitempty"`
	FSize  uint64 `json:"fsize,omitempty"`
	NoFile uint64 `json:"nofile,omitempty"`
}

// Hidden argv[1] values that select the modes of the srt-mcp binary.
const (
	ModeRunner = "__runner"
	ModeInit   = "__srt-init"
	ModeExec   = "__srt-exec"
)

// Fds as the sandbox side sees them.
const (
	fdInit       = 3
	fdConfig     = 4
	fdJSONStatus = 5
	fdSelf       = 6
	fdFirstMount = 7
)

// sandboxSelf is how the sandbox side executes the srt-mcp binary.
const sandboxSelf = "/proc/self/fd/6"
