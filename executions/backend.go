package executions

import (
	"context"

	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Backend runs a data session's code: in a bubblewrap sandbox per run
// (native), or by exec in one container per session (Docker). The
// Manager, its executions and every tool are the same for both.
type Backend interface {
	// Name is "native" or "docker".
	Name() string
	// Runs names what runs the code, for listings ("bubblewrap", or the
	// Docker image).
	Runs() string
	// Supports says whether the backend runs language, and if not, why
	// (a sentence naming the fix).
	Supports(language string) (ok bool, why string)
	// Ready checks that the backend can start sandboxes now (the engine
	// answers, the image is there) and describes what it checked.
	Ready(ctx context.Context) (string, error)
	// Start runs spec in the session's sandbox, creating the sandbox on
	// first use, and streams events to sink like runner.StartProcess:
	// ready, stdout, stderr, then exactly one of exit, timeout, cancelled
	// or error.
	Start(b sessions.Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error)
	// Destroy removes the session's sandbox (a no-op where runs leave none),
	// including one whose creation is under way; the box's workspace names
	// the session's incarnation (a session id can be opened again).
	Destroy(b sessions.Box) error
	// Release frees what the session's sandbox holds between runs (a
	// container) but keeps the session; its next run starts a new one.
	Release(b sessions.Box)
	// Cleanup removes sandboxes that no live server owns and returns how
	// many it removed.
	Cleanup(ctx context.Context) (int, error)
	// Close releases the backend's resources at shutdown.
	Close() error
}

// Native is the bubblewrap backend: each run is a fresh sandbox with the
// session's directories bind-mounted.
type Native struct {
	// Start launches a spec (the Manager's runner); nil: runner.StartProcess.
	Launch Starter
}

// Name implements Backend.
func (n *Native) Name() string { return "native" }

// Start implements Backend.
func (n *Native) Start(b sessions.Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	spec.Mounts = append(spec.Mounts,
		runner.ExtraMount{Src: b.Workspace, Dst: sessions.WorkspaceMount, Writable: true},
		runner.ExtraMount{Src: b.Cache, Dst: sessions.CacheMount, Writable: true})
	env := map[string]string{}
	for k, v := range sessions.Env() {
		env[k] = v
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	spec.Env = env
	if b.UID != 0 {
		spec.User = &runner.SandboxUser{UID: b.UID, GID: b.UID}
	}
	if n.Launch != nil {
		return n.Launch(spec, sink)
	}
	return runner.StartProcess(spec, sink)
}

// Runs implements Backend.
func (n *Native) Runs() string { return "bubblewrap" }

// Supports implements Backend: every language of the registry.
func (n *Native) Supports(string) (bool, string) { return true, "" }

// Ready implements Backend: the native sandbox is probed by the server
// itself (a real run).
func (n *Native) Ready(context.Context) (string, error) { return "", nil }

// Release implements Backend: nothing is held between runs.
func (n *Native) Release(sessions.Box) {}

// Destroy implements Backend: a native run leaves no sandbox behind.
func (n *Native) Destroy(sessions.Box) error { return nil }

// Cleanup implements Backend: sandboxes die with their server.
func (n *Native) Cleanup(context.Context) (int, error) { return 0, nil }

// Close implements Backend.
func (n *Native) Close() error { return nil }
