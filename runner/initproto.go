package runner

// The protocol between the runner (outside the sandbox) and the sandbox's
// PID 1 ("srt-mcp __srt-init", inside), over one inherited socketpair, fd 3
// inside. Each message is one JSON line.
//
//	runner                                        PID 1 (__srt-init)
//	  | initConfig --------------------------------> |  checks: own /proc, own
//	  |                                              |  user and net namespaces,
//	  | <-------------------------------- verified   |  no capabilities
//	  |  (runner compares /proc/<pid>/ns/* with its  |
//	  |   own: every namespace must differ)          |
//	  | go ----------------------------------------> |  start "__srt-exec":
//	  |                                              |    rlimits, ctty, seccomp,
//	  |                                              |    execve(command)
//	  | <---------------------- started | error      |
//	  | signal{sig} -------------------------------> |  kill(-1, sig): every
//	  |                                              |  process in the sandbox
//	  | <--------------------------- exit{code,sig}  |  command exited; the rest
//	  |                                        EOF   |  are killed; PID 1 exits
//
// The exec stage reports to PID 1 on its own close-on-exec pipe: EOF means
// execve succeeded, a JSON line means it failed and why.

const (
	initMsgConfig   = "config"
	initMsgVerified = "verified"
	initMsgGo       = "go"
	initMsgStarted  = "started"
	initMsgError    = "error"
	initMsgSignal   = "signal"
	initMsgExit     = "exit"
)

// initMsg is every message of the PID 1 protocol.
type initMsg struct {
	T       string      `json:"t"`
	Config  *initConfig `json:"config,omitempty"`
	Code    string      `json:"code,omitempty"` // error
	Message string      `json:"message,omitempty"`
	Sig     int         `json:"sig,omitempty"`  // signal, exit
	Exit    int         `json:"exit,omitempty"` // exit
}

// initConfig is what PID 1 and the exec stage need to start the command.
type initConfig struct {
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Cwd    string   `json:"cwd"`
	PTY    bool     `json:"pty,omitempty"`
	Limits rlimits  `json:"limits"`
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
