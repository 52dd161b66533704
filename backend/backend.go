// Package backend is the seam every run of the server goes through: a
// sessionless command, a data session's run or interpreter, the readiness
// probe, the cache template's build. A Backend starts a runner.Spec in a
// sandbox and streams its events; Native does it with bubblewrap (the
// runner pool, the sandbox user, the runners' private cache are its), and
// package dockerbox with one container per session. A new backend (a
// microVM, gVisor) is one more implementation of this interface and one
// line in the server's wiring.
package backend

import (
	"context"

	"github.com/srt-mcp/srt-mcp/runner"
)

// Backend runs sandboxes.
type Backend interface {
	// Name is "native" or "docker".
	Name() string
	// Runs names what runs the code, for listings ("bubblewrap", or the
	// Docker image).
	Runs() string
	// Supports says whether the backend runs language in a data session,
	// and if not, why (a sentence naming the fix).
	Supports(language string) (ok bool, why string)
	// Ready checks that the backend can start sandboxes now (the engine
	// answers, the image is there) and describes what it checked.
	Ready(ctx context.Context) (string, error)
	// Start runs spec and streams its events to sink like
	// runner.StartProcess: ready, stdout, stderr, then exactly one of exit,
	// timeout, cancelled or error. With a box, it runs in that data
	// session's sandbox (made on first use) with its directories mounted;
	// without one, in a sandbox of its own that nothing outlives.
	Start(box *Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error)
	// Destroy removes the session's sandbox (a no-op where runs leave none),
	// including one whose creation is under way; the box's workspace names
	// the session's incarnation (a session id can be opened again).
	Destroy(b Box) error
	// Release frees what the session's sandbox holds between runs (a
	// container) but keeps the session; its next run starts a new one.
	Release(b Box)
	// Recycle removes the session's sandbox now, whatever still runs in
	// it (its interpreters were stopped), and keeps the session: its
	// files changed under it (a restore), and the next run starts anew.
	Recycle(b Box)
	// Cleanup removes sandboxes that no live server owns and returns how
	// many it removed.
	Cleanup(ctx context.Context) (int, error)
	// Close releases the backend's resources at shutdown.
	Close() error
}

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

// WorkspaceMount is where a session's workspace appears in its sandboxes.
const WorkspaceMount = "/mnt/data"

// CacheMount is where a session's cache directory appears.
const CacheMount = runner.SandboxHome + "/.cache"

// SitePackages is where install_package puts a session's packages (in its
// cache directory: the session's own, never the host's).
const SitePackages = CacheMount + "/site-packages"

// Env is the environment of every data-session run: matplotlib writes its
// font cache to the session's cache, kept between runs, and the session's
// installed packages are importable.
func Env() map[string]string {
	return map[string]string{"MPLCONFIGDIR": CacheMount + "/matplotlib", "XDG_CACHE_HOME": CacheMount,
		"PYTHONPATH": SitePackages}
}

// Native is the bubblewrap backend: each run is a fresh sandbox, a data
// session's with its directories bind-mounted.
type Native struct {
	// Pool has runners started ahead of need (nil: a runner process per
	// run).
	Pool *runner.Pool
	// User is the host user sandboxes without one of their own run as
	// when the server is root (a data session's runs as its own uid).
	User *runner.SandboxUser
	// CacheDir is the runners' private cache (the sandbox's /etc
	// mirror); "": none.
	CacheDir string
}

var _ Backend = (*Native)(nil)

// Name implements Backend.
func (n *Native) Name() string { return "native" }

// Start implements Backend.
func (n *Native) Start(b *Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	if b != nil {
		spec.Mounts = append(spec.Mounts,
			runner.ExtraMount{Src: b.Workspace, Dst: WorkspaceMount, Writable: true},
			runner.ExtraMount{Src: b.Cache, Dst: CacheMount, Writable: true})
		env := Env()
		for k, v := range spec.Env {
			env[k] = v
		}
		spec.Env = env
		if b.UID != 0 {
			spec.User = &runner.SandboxUser{UID: b.UID, GID: b.UID}
		}
	}
	if spec.User == nil {
		spec.User = n.User
	}
	if spec.CacheDir == "" {
		spec.CacheDir = n.CacheDir
	}
	start := runner.StartProcess
	if n.Pool != nil {
		start = n.Pool.Start
	}
	p, err := start(spec, sink)
	if err != nil {
		return nil, err // not a Handle holding a nil *Process
	}
	return p, nil
}

// Runs implements Backend.
func (n *Native) Runs() string { return "bubblewrap" }

// Supports implements Backend: every language of the registry.
func (n *Native) Supports(string) (bool, string) { return true, "" }

// Ready implements Backend: the native sandbox is probed by the server
// itself (a real run).
func (n *Native) Ready(context.Context) (string, error) { return "", nil }

// Release implements Backend: nothing is held between runs.
func (n *Native) Release(Box) {}

// Recycle implements Backend: nothing is held between runs.
func (n *Native) Recycle(Box) {}

// Destroy implements Backend: a native run leaves no sandbox behind.
func (n *Native) Destroy(Box) error { return nil }

// Cleanup implements Backend: sandboxes die with their server.
func (n *Native) Cleanup(context.Context) (int, error) { return 0, nil }

// Close implements Backend.
func (n *Native) Close() error { return nil }
