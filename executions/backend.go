package executions

import (
	"context"

	"github.com/srt-mcp/srt-mcp/runner"
)

// Box is what a backend knows of a data session: its id and the host
// directories it mounts (the workspace at /mnt/data, the cache at the
// sandbox's ~/.cache). Files move between the server and a session through
// these host directories whatever the backend, so uploads, artifacts and
// downloads are the same code for every backend.
type Box struct {
	SessionID string
	Workspace string
	Cache     string
	// UID is the session's own host uid (and gid) its sandboxes run as; 0:
	// the backend's default.
	UID int
}

// BoxOf returns the Box of a session.
func BoxOf(ss *Session) Box {
	return Box{SessionID: ss.ID, Workspace: ss.Workspace, Cache: ss.Cache, UID: ss.uid}
}

// Backend runs a data session's code: in a bubblewrap sandbox per run
// (native), or by exec in one container per session (Docker). The
// Manager, its executions and every tool are the same for both.
type Backend interface {
	// Name is "native" or "docker".
	Name() string
	// Start runs spec in the session's sandbox, creating the sandbox on
	// first use, and streams events to sink like runner.StartProcess:
	// ready, stdout, stderr, then exactly one of exit, timeout, cancelled
	// or error.
	Start(b Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error)
	// Destroy removes the session's sandbox (a no-op where runs leave none),
	// including one whose creation is under way; the box's workspace names
	// the session's incarnation (a session id can be opened again).
	Destroy(b Box) error
	// Cleanup removes sandboxes that no live server owns and returns how
	// many it removed.
	Cleanup(ctx context.Context) (int, error)
	// Close releases the backend's resources at shutdown.
	Close() error
}

// SessionCacheMount is where a session's cache directory appears.
const SessionCacheMount = runner.SandboxHome + "/.cache"

// SitePackages is where install_package puts a session's packages (in its
// cache directory: the session's own, never the host's).
const SitePackages = SessionCacheMount + "/site-packages"

// SessionEnv is the environment of every data-session run: matplotlib
// writes its font cache to the session's cache, kept between runs, and
// the session's installed packages are importable.
func SessionEnv() map[string]string {
	return map[string]string{"MPLCONFIGDIR": SessionCacheMount + "/matplotlib", "XDG_CACHE_HOME": SessionCacheMount,
		"PYTHONPATH": SitePackages}
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
func (n *Native) Start(b Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	spec.Mounts = append(spec.Mounts,
		runner.ExtraMount{Src: b.Workspace, Dst: WorkspaceMount, Writable: true},
		runner.ExtraMount{Src: b.Cache, Dst: SessionCacheMount, Writable: true})
	env := map[string]string{}
	for k, v := range SessionEnv() {
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

// Destroy implements Backend: a native run leaves no sandbox behind.
func (n *Native) Destroy(Box) error { return nil }

// Cleanup implements Backend: sandboxes die with their server.
func (n *Native) Cleanup(context.Context) (int, error) { return 0, nil }

// Close implements Backend.
func (n *Native) Close() error { return nil }
