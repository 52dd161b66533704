// Package dockerbox is the Docker backend of data sessions: one container
// per session, created on first use from the Python data image, with the
// session's workspace at /mnt/data; each run is a `docker exec` of
// srt-mcp's exec stage in it, streamed as runner events. It talks to the
// engine only through Docker's official Go client.
//
// Identity: as root, each session's container runs as the session's own
// host uid (sessions.Config.UIDs), shared with no other session
// and no account. Process lifetime: each run lives in a cgroup of its own
// that the server kills from the host (runcg_linux.go). Cleanup: every
// container this server creates is recorded in the state directory
// (containers/<id>) before it starts, removed with its anonymous volumes on
// every path (close, TTL, shutdown, a dead PID 1 — containers are also
// AutoRemove — a failed start, a close racing the first run), and a later
// server removes only recorded containers whose server is gone. Hardening:
// no network, all capabilities dropped, no-new-privileges, read-only root,
// a capped tmpfs /tmp emptied after each run, memory/CPU/pids limits, the
// workspaces nosuid and nodev, srt-mcp's seccomp filter and file-size limit
// on every run, and an image checked against the recipe srt-mcp built it
// from (or pinned by digest).
package dockerbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Labels on every container of ours.
const (
	LabelApp      = "app"
	LabelAppValue = "srt-mcp"
	LabelSession  = "session_id"
	LabelState    = "srt-mcp.state-dir"
	LabelInstance = "srt-mcp.instance"
)

// DefaultImage is the image when none is configured.
const DefaultImage = "srt-mcp-python:latest"

// Error codes of the Docker backend.
const (
	ErrCodeUnavailable   = "docker_unavailable"
	ErrCodeImageMissing  = "image_missing"
	ErrCodeImageUnpinned = "image_unpinned"
	ErrCodeContainerDied = "container_died"
	ErrCodeOOM           = "oom_killed"
	// ErrCodeSessionClosed: the session closed while its run was starting.
	ErrCodeSessionClosed = "session_closed"
)

// ExecStageMount is where srt-mcp's exec stage is mounted (read-only) in
// each container.
const ExecStageMount = "/.srt-mcp/exec"

// TrustMount is where a container finds the trust bundles of terminated
// TLS (the variables tools read point at one).
const TrustMount = "/.srt-mcp/trust"

// Config sets up the backend.
type Config struct {
	Image    string  // SANDBOX_IMAGE
	Memory   int64   // SANDBOX_MEMORY_LIMIT, bytes (default 512 MiB)
	CPUs     float64 // SANDBOX_CPU_LIMIT (default 1)
	Pids     int64   // most processes per container (default 256)
	TmpBytes int64   // size of /tmp (default and at most a quarter of Memory)
	// StateDir and Instance identify the owning server (see
	// sessions.InstanceAlive).
	StateDir string
	Instance string
	// PersistDir holds persistent workspaces (sessions.Registry.PersistDir):
	// made nosuid,nodev like the workspaces.
	PersistDir string
	// ExecStage is the srt-mcp binary whose __docker-exec mode starts each
	// run; it is copied into the state directory and mounted read-only.
	ExecStage string
	// FileSize is the largest file a run may write (RLIMIT_FSIZE; default
	// 1 GiB, as native sandboxes).
	FileSize int64
	// Egress serves a run's network allow-list (the same netproxy as the
	// native sandbox); nil: runs with allowed_domains are refused.
	Egress runner.EgressFunc
	// Native runs what has no session (a command without session_id, the
	// readiness probe): a bubblewrap sandbox of its own, as on the native
	// backend.
	Native *backend.Native
	// Prestart, when set, says whether to start an exec stage for a
	// session's next run after each run now (--sandbox-pool and its CPU
	// budget); nil: never.
	Prestart func() bool
}

// Backend implements backend.Backend on a Docker engine.
type Backend struct {
	cfg   Config
	cli   *client.Client
	uid   int    // the container user when a session has no uid of its own
	stage string // host path of the exec stage binary
	// trustDir holds the sandboxes' trust bundles for terminated TLS
	// (certificates only), mounted read-only at TrustMount in every
	// container: a bundle written after a container started is there too.
	trustDir string
	cgroups  bool     // runs get a cgroup of their own (root)
	nosuid   []string // bind mounts made nosuid,nodev (workspaces, persistent workspaces)
	// binMount is the tmpfs holding the exec stage ("" if none).
	binMount string

	mu         sync.Mutex
	containers map[string]*box // by session workspace (its incarnation)
	creating   map[string]*sync.Mutex
	closed     map[string]bool // workspaces whose session ended
	stats      PrestartStats   // see Stats
}

// box is one session's container.
type box struct {
	id      string
	session string
	user    string // the container's user (Backend.userOf)
	pid1    int    // host pid of its PID 1
	running int    // runs in it now
	// next is an exec stage started for the box's next run, waiting for
	// it; starting is true while one is being started (see prestart.go).
	next     *waitingExec
	starting bool
}

var _ backend.Backend = (*Backend)(nil)

// New connects to the engine (DOCKER_HOST or the default socket) and checks
// that the image exists and is one srt-mcp built, with errors that say
// what to do.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.Memory <= 0 {
		cfg.Memory = 512 << 20
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = 1
	}
	if cfg.Pids <= 0 {
		cfg.Pids = 256
	}
	// /tmp is memory: at most a quarter of the container's, so leftovers
	// there can never starve a later run.
	if cfg.TmpBytes <= 0 || cfg.TmpBytes > cfg.Memory/4 {
		cfg.TmpBytes = cfg.Memory / 4
	}
	if cfg.FileSize <= 0 {
		cfg.FileSize = 1 << 30
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, &runner.Error{Code: ErrCodeUnavailable, Message: "Docker client: " + err.Error()}
	}
	b := &Backend{cfg: cfg, cli: cli, containers: map[string]*box{}, creating: map[string]*sync.Mutex{}, closed: map[string]bool{},
		uid: os.Geteuid(), cgroups: os.Geteuid() == 0}
	fail := func(err error) (*Backend, error) {
		cli.Close()
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{}); err != nil {
		return fail(&runner.Error{Code: ErrCodeUnavailable, Message: fmt.Sprintf(
			"the Docker engine is not reachable at %s (%v); start it (dockerd, or systemctl start docker), set DOCKER_HOST, or use --backend native",
			cli.DaemonHost(), err)})
	}
	if err := CheckImage(pctx, cli, cfg.Image); err != nil {
		return fail(err)
	}
	b.binMount = privateBinDir(filepath.Join(cfg.StateDir, "bin"))
	// In the exec stage's private tmpfs when there is one: a container's
	// mount table then shows a path inside it, never the state directory.
	b.trustDir = filepath.Join(cfg.StateDir, "trust")
	if b.binMount != "" {
		b.trustDir = filepath.Join(b.binMount, "trust")
	}
	if err := os.MkdirAll(b.trustDir, 0o755); err != nil {
		return fail(&runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "trust bundle directory: " + err.Error()})
	}
	if b.stage, err = stageBinary(cfg.StateDir, cfg.ExecStage); err != nil {
		return fail(&runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "staging srt-mcp's exec stage: " + err.Error()})
	}
	// Workspaces that are filesystems of their own are nosuid,nodev
	// already; a bind over the directory holding them would hide them
	// (this server's, or another's sharing the state directory).
	for _, ws := range []string{filepath.Join(cfg.StateDir, "workspaces"), cfg.PersistDir} {
		// A killed server's bind is taken over even with volumes below it
		// (nobody else would ever unmount it).
		if ws != "" && os.Geteuid() == 0 && (!mountsUnder(ws) || selfBound(ws) == "ours") {
			// The persistent directory's bind stays at shutdown: replicas
			// with other state directories may share the directory (and
			// its bind), and a stop that detached it would take their
			// open workspaces' mounts with it. The next server takes it
			// over.
			if m := mountNosuid(ws); m != "" && ws != cfg.PersistDir {
				b.nosuid = append(b.nosuid, m)
			}
		}
	}
	if err := os.MkdirAll(b.recordDir(), 0o700); err != nil {
		return fail(err)
	}
	return b, nil
}

// CheckImage refuses an image srt-mcp did not build: its srt-mcp.recipe
// label must be a recipe of this srt-mcp (the registry-free build's or the
// Dockerfile's), unless the image is named by digest (name@sha256:...), which
// pins it exactly.
func CheckImage(ctx context.Context, cli *client.Client, image string) error {
	img, err := cli.ImageInspect(ctx, image)
	if err != nil {
		return &runner.Error{Code: ErrCodeImageMissing, Message: fmt.Sprintf(
			"the image %s is not on this Docker engine (%v); build it with: srt-mcp image build --tag %s (or make image)", image, err, image)}
	}
	if strings.Contains(image, "@sha256:") {
		return nil
	}
	got := ""
	if img.Config != nil {
		got = img.Config.Labels[LabelRecipe]
	}
	for _, want := range KnownRecipes() {
		if got == want {
			return nil
		}
	}
	return &runner.Error{Code: ErrCodeImageUnpinned, Message: fmt.Sprintf(
		"the image %s was not built by this srt-mcp (its %s label is %q; this srt-mcp builds %s): build it with: srt-mcp image build --tag %s, or name an image you trust by digest (NAME@sha256:...)",
		image, LabelRecipe, got, strings.Join(KnownRecipes(), " or "), image)}
}

// stageMode lets a container's users run the exec stage but not read it:
// the kernel then makes each stage process non-dumpable from its exec on,
// so that no other process of the same user opens its stdin, memory or
// environment through /proc (a stage waiting for a session's next run,
// see prestart.go, would otherwise take a run configuration written in by
// the session's code); the command it execs is dumpable again.
const stageMode = 0o711

// stageBinary copies the exec stage into the state directory (once per
// build), where containers mount it from: the path a container's mount
// table shows is the state directory's, never the binary's own, and as
// root not even that (the directory is a tmpfs: privateBinDir).
func stageBinary(stateDir, src string) (string, error) {
	if src == "" {
		p, err := os.Executable()
		if err != nil {
			return "", err
		}
		src = p
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return "", err
	}
	dir := filepath.Join(stateDir, "bin")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	_ = os.Chmod(dir, 0o711)
	dst := filepath.Join(dir, "srt-mcp-exec-"+hex.EncodeToString(h.Sum(nil))[:16])
	if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() {
		if fi.Mode().Perm() != stageMode {
			if err := os.Chmod(dst, stageMode); err != nil {
				return "", err
			}
		}
		return dst, nil
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".stage-*")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	err = tmp.Chmod(stageMode)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	// Older builds' stages go.
	old, _ := filepath.Glob(filepath.Join(dir, "srt-mcp-exec-*"))
	for _, o := range old {
		if o != dst {
			os.Remove(o)
		}
	}
	return dst, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "docker" }

// Languages are what the image runs.
var Languages = map[string]bool{"python": true, "bash": true}

// Runs implements backend.Backend: the image.
func (b *Backend) Runs() string { return "docker image " + b.cfg.Image }

// Supports implements backend.Backend.
func (b *Backend) Supports(language string) (bool, string) {
	if Languages[language] {
		return true, ""
	}
	return false, "the Docker backend's image has Python and bash only; use --backend native for " + language
}

// Ready implements backend.Backend: the engine answers and still has
// the image this server checked at start-up.
func (b *Backend) Ready(ctx context.Context) (string, error) {
	v, err := b.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", fmt.Errorf("the Docker engine does not answer: %v", err)
	}
	if err := CheckImage(ctx, b.cli, b.cfg.Image); err != nil {
		return "", err
	}
	return fmt.Sprintf("engine %s, image %s", v.Version, b.cfg.Image), nil
}

// Close implements backend.Backend.
func (b *Backend) Close() error {
	if others := b.otherServers(); !others {
		for _, m := range b.nosuid {
			unmountNosuid(m)
		}
		if b.binMount != "" {
			unmountNosuid(b.binMount) // running containers keep their stage
		}
	}
	return b.cli.Close()
}

// otherServers reports whether another live server uses the state
// directory.
func (b *Backend) otherServers() bool {
	ents, _ := os.ReadDir(filepath.Join(b.cfg.StateDir, "sessions"))
	for _, e := range ents {
		if e.Name() != b.cfg.Instance && sessions.InstanceAlive(b.cfg.StateDir, e.Name()) {
			return true
		}
	}
	return false
}

// Client is the engine client (for tests and tools).
func (b *Backend) Client() *client.Client { return b.cli }

// userOf is the container user of a box: its session's own uid, else the
// server's.
func (b *Backend) userOf(bx backend.Box) string {
	if bx.UID != 0 {
		return fmt.Sprintf("%d:%d", bx.UID, bx.UID)
	}
	return fmt.Sprintf("%d:%d", b.uid, os.Getegid())
}

// ErrClosed: the session ended (a run that raced its close).
var errClosed = &runner.Error{Code: ErrCodeSessionClosed, Message: "the session was closed before the run started"}

// Container returns the session's container, creating and starting it on
// first use.
func (b *Backend) Container(ctx context.Context, bx backend.Box) (*box, error) {
	key := bx.Workspace
	b.mu.Lock()
	if c, ok := b.containers[key]; ok {
		b.mu.Unlock()
		return c, nil
	}
	if b.closed[key] {
		b.mu.Unlock()
		return nil, errClosed
	}
	lk, ok := b.creating[key]
	if !ok {
		lk = &sync.Mutex{}
		b.creating[key] = lk
	}
	b.mu.Unlock()
	lk.Lock()
	defer lk.Unlock()
	b.mu.Lock()
	c, ok := b.containers[key]
	closed := b.closed[key]
	b.mu.Unlock()
	if ok {
		return c, nil
	}
	if closed {
		return nil, errClosed
	}
	init, pids := true, b.cfg.Pids
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "srt-mcp-" + bx.SessionID + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36),
		Config: &container.Config{
			Image:      b.cfg.Image,
			User:       b.userOf(bx),
			WorkingDir: sessions.WorkspaceMount,
			Entrypoint: []string{"/bin/sleep", "infinity"},
			Env:        []string{"HOME=" + runner.SandboxHome, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"},
			Labels: map[string]string{LabelApp: LabelAppValue, LabelSession: bx.SessionID,
				LabelState: b.cfg.StateDir, LabelInstance: b.cfg.Instance},
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    "none",
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			ReadonlyRootfs: true,
			Init:           &init,
			AutoRemove:     true, // a dead PID 1 takes the container (and its anonymous volumes) with it
			Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", b.cfg.TmpBytes)},
			// sysfs is not namespaced: a loop device's backing_file names
			// every workspace image's host path (the state directory, the
			// next session's ready volume). Docker's own masks, and the
			// block devices.
			MaskedPaths: maskedPaths,
			Mounts: []mount.Mount{
				{Type: mount.TypeBind, Source: bx.Workspace, Target: sessions.WorkspaceMount},
				{Type: mount.TypeBind, Source: bx.Cache, Target: CacheMount},
				{Type: mount.TypeBind, Source: b.stage, Target: ExecStageMount, ReadOnly: true},
				{Type: mount.TypeBind, Source: b.trustDir, Target: TrustMount, ReadOnly: true},
			},
			Resources: container.Resources{
				Memory:     b.cfg.Memory,
				MemorySwap: b.cfg.Memory, // no swap beyond the limit
				NanoCPUs:   int64(b.cfg.CPUs * 1e9),
				PidsLimit:  &pids,
			},
		},
	})
	if err != nil {
		return nil, b.engineErr("creating the session's container", err)
	}
	// Recorded before it runs: whatever happens to this server from here,
	// the next one on this state directory knows the container is its to
	// remove.
	if err := b.record(res.ID); err != nil {
		b.remove(res.ID)
		return nil, &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "recording the session's container: " + err.Error()}
	}
	if _, err := b.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		b.remove(res.ID)
		return nil, b.engineErr("starting the session's container", err)
	}
	insp, err := b.cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
	if err != nil || insp.Container.State == nil || insp.Container.State.Pid == 0 {
		b.remove(res.ID)
		return nil, &runner.Error{Code: ErrCodeContainerDied, Message: fmt.Sprintf("the session's container did not stay up (%v)", err)}
	}
	c = &box{id: res.ID, session: bx.SessionID, user: b.userOf(bx), pid1: insp.Container.State.Pid}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.creating, key)
	if b.closed[key] {
		go b.remove(res.ID)
		return nil, errClosed
	}
	b.containers[key] = c
	return c, nil
}

// maskedPaths are Docker's default masked paths and the host's block
// devices (sysfs shows each loop device's backing file).
var maskedPaths = []string{
	"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	"/sys/devices/virtual/powercap",
	"/sys/block", "/sys/class/block", "/sys/devices/virtual/block", "/proc/partitions", "/proc/fs",
}

// CacheMount is the session's cache directory inside its container, the
// same place as in a native sandbox (see backend.Env).
const CacheMount = backend.CacheMount

func (b *Backend) engineErr(what string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return &runner.Error{Code: ErrCodeUnavailable, Message: fmt.Sprintf("%s: the Docker engine is not reachable (%v); start it or use --backend native", what, err)}
	}
	if strings.Contains(err.Error(), "No such image") {
		return &runner.Error{Code: ErrCodeImageMissing, Message: fmt.Sprintf("%s: the image %s is missing; build it with: srt-mcp image build --tag %s", what, b.cfg.Image, b.cfg.Image)}
	}
	return &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: fmt.Sprintf("%s: %v", what, err)}
}

// recordDir holds one file per container this state directory's servers
// created (content: the server's instance).
func (b *Backend) recordDir() string { return filepath.Join(b.cfg.StateDir, "containers") }

func (b *Backend) record(id string) error {
	return os.WriteFile(filepath.Join(b.recordDir(), id), []byte(b.cfg.Instance), 0o600)
}

// remove removes a container of ours (force: its processes die), its
// anonymous volumes, and its record.
func (b *Backend) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || strings.Contains(err.Error(), "No such container") || strings.Contains(err.Error(), "is already in progress") {
		_ = os.Remove(filepath.Join(b.recordDir(), id))
	}
}

// removeBox removes a session's container and lets go of the exec stage
// waiting in it for the session's next run.
func (b *Backend) removeBox(c *box) {
	b.dropNext(c)
	b.remove(c.id)
}

// forget drops a session's container (it died or was removed) and makes
// sure it is gone.
func (b *Backend) forget(key string, c *box) {
	b.mu.Lock()
	if b.containers[key] == c {
		delete(b.containers, key)
	}
	b.mu.Unlock()
	b.removeBox(c)
}

// Destroy implements backend.Backend: the session's container goes,
// with everything running in it, including one being created right now
// (it is removed when its creation ends).
func (b *Backend) Destroy(bx backend.Box) error {
	key := bx.Workspace
	b.mu.Lock()
	b.closed[key] = true
	c, ok := b.containers[key]
	delete(b.containers, key)
	b.mu.Unlock()
	if ok {
		b.removeBox(c)
	}
	return nil
}

// Release implements backend.Backend: it removes a session's
// container but keeps the session; its next run starts a new one (the
// LibreChat API's stored sessions hold no container between calls).
func (b *Backend) Release(bx backend.Box) {
	b.mu.Lock()
	c, ok := b.containers[bx.Workspace]
	if ok && c.running > 0 {
		ok = false // a run is using it; it goes with the session
	}
	if ok {
		delete(b.containers, bx.Workspace)
	}
	b.mu.Unlock()
	if ok {
		b.removeBox(c)
	}
}

// Recycle implements backend.Backend: the session's container goes even
// if an exec is still counted in it (an interpreter just stopped).
func (b *Backend) Recycle(bx backend.Box) {
	b.mu.Lock()
	c, ok := b.containers[bx.Workspace]
	if ok {
		delete(b.containers, bx.Workspace)
	}
	b.mu.Unlock()
	if ok {
		b.removeBox(c)
	}
}

// Cleanup implements backend.Backend: it removes the containers this
// state directory's servers created whose server is gone (their record
// names an instance whose lock nobody holds). A container it has no
// record of is never touched, whatever its labels say: it may be another
// server's, on this host or another.
func (b *Backend) Cleanup(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(b.recordDir())
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range ents {
		d, err := nofollow.OpenTrusted(b.recordDir())
		if err != nil {
			return n, err
		}
		inst, err := d.ReadFile(e.Name(), 256)
		d.Close()
		if err != nil || string(inst) == b.cfg.Instance || sessions.InstanceAlive(b.cfg.StateDir, string(inst)) {
			continue // ours, or another live server's
		}
		_, err = b.cli.ContainerRemove(ctx, e.Name(), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			n++
			fallthrough
		case strings.Contains(err.Error(), "No such container"):
			_ = os.Remove(filepath.Join(b.recordDir(), e.Name()))
		default:
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// CleanupForeign removes the containers of dead servers that kept their
// state in another state directory (replicas sharing a persistent
// directory on this engine): a dead replica's container still holds the
// filesystem of a persistent workspace another replica is resuming. A
// container counts as such a server's only when its labels name an
// srt-mcp state directory on this host whose instance lock nobody holds.
func (b *Backend) CleanupForeign(ctx context.Context) (int, error) {
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelApp+"="+LabelAppValue)})
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range res.Items {
		state, inst := c.Labels[LabelState], c.Labels[LabelInstance]
		if state == "" || inst == "" || state == b.cfg.StateDir || !filepath.IsAbs(state) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(state, "sessions")); err != nil || !fi.IsDir() || sessions.InstanceAlive(state, inst) {
			continue // not a state directory here, or its server lives
		}
		if _, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !strings.Contains(err.Error(), "No such container") {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// RemoveAll removes every container of this server (at shutdown).
func (b *Backend) RemoveAll(ctx context.Context) {
	b.mu.Lock()
	all := b.containers
	b.containers = map[string]*box{}
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func(c *box) {
			defer wg.Done()
			b.removeBox(c)
		}(c)
	}
	wg.Wait()
}
