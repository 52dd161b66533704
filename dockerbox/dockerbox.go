// Package dockerbox is the Docker backend of data sessions: one container
// per session, created on first use from the Python data image, with the
// session's workspace at /mnt/data; each run is a `docker exec` in it,
// streamed as runner events. It talks to the engine only through Docker's
// official Go client.
//
// Containers are hardened as seed 000 §4 asks (no network, all
// capabilities dropped, no-new-privileges, read-only root, tmpfs /tmp,
// memory/CPU/pids limits) and labelled app=srt-mcp, session_id=<id>, plus
// the owning server's state directory and instance, so that a later server
// can tell orphans (their server is gone) from another live server's.
package dockerbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/runner"
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
	ErrCodeContainerDied = "container_died"
	ErrCodeOOM           = "oom_killed"
)

// Config sets up the backend.
type Config struct {
	Image    string  // SANDBOX_IMAGE
	Memory   int64   // SANDBOX_MEMORY_LIMIT, bytes (default 512 MiB)
	CPUs     float64 // SANDBOX_CPU_LIMIT (default 1)
	Pids     int64   // most processes per container (default 256)
	TmpBytes int64   // size of /tmp (default 512 MiB)
	// StateDir and Instance identify the owning server (see
	// executions.InstanceAlive).
	StateDir string
	Instance string
	// Egress serves a run's network allow-list (the same netproxy as the
	// native sandbox); nil: runs with allowed_domains are refused.
	Egress runner.EgressFunc
}

// Backend implements executions.Backend on a Docker engine.
type Backend struct {
	cfg Config
	cli *client.Client
	uid string // the container user, "uid:gid"

	mu         sync.Mutex
	containers map[string]string // session id -> container id
	creating   map[string]*sync.Mutex
}

var _ executions.Backend = (*Backend)(nil)

// New connects to the engine (DOCKER_HOST or the default socket) and checks
// that the image exists, with errors that say what to do.
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
	if cfg.TmpBytes <= 0 {
		cfg.TmpBytes = 512 << 20
	}
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, &runner.Error{Code: ErrCodeUnavailable, Message: "Docker client: " + err.Error()}
	}
	b := &Backend{cfg: cfg, cli: cli, containers: map[string]string{}, creating: map[string]*sync.Mutex{}}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, &runner.Error{Code: ErrCodeUnavailable, Message: fmt.Sprintf(
			"the Docker engine is not reachable at %s (%v); start it (dockerd, or systemctl start docker), set DOCKER_HOST, or use --backend native",
			cli.DaemonHost(), err)}
	}
	if _, err := cli.ImageInspect(pctx, cfg.Image); err != nil {
		cli.Close()
		return nil, &runner.Error{Code: ErrCodeImageMissing, Message: fmt.Sprintf(
			"the image %s is not on this Docker engine (%v); build it with: srt-mcp image build --tag %s (or make image)", cfg.Image, err, cfg.Image)}
	}
	b.uid = containerUser()
	return b, nil
}

// containerUser runs containers as the server's own uid when it is not
// root (the workspace is its); as root, as uid 1000, the image's sandbox
// user, and the workspace is handed to it (see Prepare).
func containerUser() string {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("%d:%d", os.Geteuid(), os.Getegid())
	}
	return fmt.Sprintf("%d:%d", SandboxUID, SandboxUID)
}

// SandboxUID is the image's unprivileged user.
const SandboxUID = 1000

// Name implements executions.Backend.
func (b *Backend) Name() string { return "docker" }

// Close implements executions.Backend.
func (b *Backend) Close() error { return b.cli.Close() }

// Client is the engine client (for tests and tools).
func (b *Backend) Client() *client.Client { return b.cli }

// Container returns the session's container id, creating and starting it
// on first use.
func (b *Backend) Container(ctx context.Context, box executions.Box) (string, error) {
	b.mu.Lock()
	if id, ok := b.containers[box.SessionID]; ok {
		b.mu.Unlock()
		return id, nil
	}
	lk, ok := b.creating[box.SessionID]
	if !ok {
		lk = &sync.Mutex{}
		b.creating[box.SessionID] = lk
	}
	b.mu.Unlock()
	lk.Lock()
	defer lk.Unlock()
	b.mu.Lock()
	id, ok := b.containers[box.SessionID]
	b.mu.Unlock()
	if ok {
		return id, nil
	}
	init, pids := true, b.cfg.Pids
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "srt-mcp-" + box.SessionID + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36),
		Config: &container.Config{
			Image:      b.cfg.Image,
			User:       b.uid,
			WorkingDir: executions.WorkspaceMount,
			Entrypoint: []string{"/bin/sleep", "infinity"},
			Env:        []string{"HOME=" + runner.SandboxHome, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"},
			Labels: map[string]string{LabelApp: LabelAppValue, LabelSession: box.SessionID,
				LabelState: b.cfg.StateDir, LabelInstance: b.cfg.Instance},
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    "none",
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			ReadonlyRootfs: true,
			Init:           &init,
			Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", b.cfg.TmpBytes)},
			Mounts: []mount.Mount{
				{Type: mount.TypeBind, Source: box.Workspace, Target: executions.WorkspaceMount},
				{Type: mount.TypeBind, Source: box.Cache, Target: CacheMount},
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
		return "", b.engineErr("creating the session's container", err)
	}
	if _, err := b.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		_, _ = b.cli.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
		return "", b.engineErr("starting the session's container", err)
	}
	b.mu.Lock()
	b.containers[box.SessionID] = res.ID
	delete(b.creating, box.SessionID)
	b.mu.Unlock()
	return res.ID, nil
}

// CacheMount is the session's cache directory inside its container, the
// same place as in a native sandbox (see executions.SessionEnv).
const CacheMount = executions.SessionCacheMount

func (b *Backend) engineErr(what string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return &runner.Error{Code: ErrCodeUnavailable, Message: fmt.Sprintf("%s: the Docker engine is not reachable (%v); start it or use --backend native", what, err)}
	}
	if strings.Contains(err.Error(), "No such image") {
		return &runner.Error{Code: ErrCodeImageMissing, Message: fmt.Sprintf("%s: the image %s is missing; build it with: srt-mcp image build --tag %s", what, b.cfg.Image, b.cfg.Image)}
	}
	return &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: fmt.Sprintf("%s: %v", what, err)}
}

// forget drops a container from the map (it died or was removed).
func (b *Backend) forget(sessionID, id string) {
	b.mu.Lock()
	if b.containers[sessionID] == id {
		delete(b.containers, sessionID)
	}
	b.mu.Unlock()
}

// Destroy implements executions.Backend: the session's container goes,
// with everything running in it.
func (b *Backend) Destroy(sessionID string) error {
	b.mu.Lock()
	id, ok := b.containers[sessionID]
	delete(b.containers, sessionID)
	b.mu.Unlock()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	return err
}

// Cleanup implements executions.Backend: it removes every container with
// our label whose server is gone.
func (b *Backend) Cleanup(ctx context.Context) (int, error) {
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelApp+"="+LabelAppValue)})
	if err != nil {
		return 0, b.engineErr("listing containers", err)
	}
	n := 0
	var errs []error
	for _, c := range list.Items {
		if c.Labels[LabelState] == b.cfg.StateDir && c.Labels[LabelInstance] == b.cfg.Instance {
			continue // ours
		}
		if executions.InstanceAlive(c.Labels[LabelState], c.Labels[LabelInstance]) {
			continue // another live server's
		}
		if _, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
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
	ids := b.containers
	b.containers = map[string]string{}
	b.mu.Unlock()
	for _, id := range ids {
		_, _ = b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	}
}

// FileOwner is who must own the session's files for the container user to
// write them: the image's sandbox user when the server runs as root, else
// nobody needs changing (nil).
func FileOwner() *executions.Owner {
	if os.Geteuid() != 0 {
		return nil
	}
	return &executions.Owner{UID: SandboxUID, GID: SandboxUID}
}
