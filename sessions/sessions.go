// Package sessions owns data sessions: the registry (ids, the cap, idle
// TTL, one run at a time, each session's own host uid when the server is
// root), each session's workspace and its file operations (upload, read,
// list, remove: relative to open directories, never through a link; see
// package nofollow), its audit log, and the state directory's layout. A
// backend (a bubblewrap sandbox per run, or a container) mounts what a
// session's Box names.
package sessions

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/opfile"
	"github.com/srt-mcp/srt-mcp/printable"
	"github.com/srt-mcp/srt-mcp/volume"
)

// WorkspaceMount is where a session's workspace appears in its sandboxes.
const WorkspaceMount = backend.WorkspaceMount

// Session errors carry the seed 000 error codes.
type Error = errs.Error

func sessErr(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Config bounds the sessions of a server.
type Config struct {
	// StateDir holds the sessions' workspaces (sessions/) and audit logs
	// (audit/). No sandbox sees any of it but its own workspace.
	StateDir string
	// TTL closes a session idle for this long (default 30 minutes).
	TTL time.Duration
	// Max is the most open sessions (default 10).
	Max int
	// MaxPerPrincipal is the most open sessions one principal holds (0:
	// Max): its share of the server, so that no key takes every session.
	MaxPerPrincipal int
	// Owner, when set, owns every directory and file the server creates in
	// a session (when UIDs is not set).
	Owner *Owner
	// UIDs, when set (a root server), gives each session its own host uid
	// and gid from this range: its sandboxes or container run as it and it
	// owns the session's files. No other session and no account share it.
	UIDs *UIDRange
	// Reach makes the directories above each workspace searchable by
	// others (0711, never listable): a root server's bubblewrap runs as the
	// sandbox user and reaches its mounts by path.
	Reach bool
	// Replica, when set, names this server in every session id it mints
	// (sess_<replica>_<12 hex>), so a proxy can route a call to the
	// replica that holds the session; an id naming another replica is
	// refused here.
	Replica string
	// PersistDir holds persistent workspaces (default StateDir/persistent;
	// replicas may share it); PersistTTL removes one suspended this long
	// (default 7 days); MaxPersist and MaxPersistPerPrincipal bound how
	// many there are (defaults 64 and 8).
	PersistDir             string
	PersistTTL             time.Duration
	MaxPersist             int
	MaxPersistPerPrincipal int
	// VolumeBytes, when set, gives each session a filesystem of its own
	// that holds this many bytes of files, its workspace and cache
	// together (package volume: a root server). If the first volume
	// cannot be made, sessions are directories and VolumeStatus says why.
	VolumeBytes int64
}

// UIDRange is a range of host uids (and the same gids) the server owns.
type UIDRange struct{ First, Count int }

// DefaultUIDs is the range a root server takes sessions' uids from:
// far above the ids of accounts and of other tools' ranges (systemd's
// dynamic users, container subuids usually start at 100000 and 524288).
var DefaultUIDs = UIDRange{First: 2_000_000, Count: 1 << 24}

// The state directory:
//
//	sessions/<instance>/lock   one per running server, flock held while it runs
//	workspaces/<w>/            one per session; <w> is random, unrelated to the
//	    instance               session id; instance names the owning server
//	    data/                  the workspace, /mnt/data in its sandboxes
//	    cache/                 the sandbox's ~/.cache
//	workspaces/.cache-template/ copied into each new session's cache
//	audit/<session id>.jsonl   kept after the session
//
// A sandbox sees <state>/workspaces/<w>/data in its mount table: nothing
// there names a session, the server, or another workspace.

// Owner is a uid and gid.
type Owner struct{ UID, GID int }

// Registry owns the data sessions: a workspace directory each, mounted at
// /mnt/data in that session's sandboxes, one run at a time, an idle TTL, a
// global cap, and an audit log.
type Registry struct {
	cfg   Config
	mu    sync.Mutex
	open  map[string]*Session
	stop  chan struct{}
	once  sync.Once
	onEnd func(s *Session)
	dir   string       // this server's instance directory
	ws    string       // the workspaces directory
	uids  map[int]bool // session uids in use
	lock  *os.File     // flock on dir/lock, held while the server runs

	draining bool // Drain was called: no session is created any more

	ready      chan string   // workspace directories with a volume mounted, ready for a session
	kick       chan struct{} // asks fillVolumes for more
	filling    chan struct{} // closed when fillVolumes returns
	volumeNote string        // why sessions are directories when volumes were asked for

	persistDir  string            // persistent workspaces (see persist.go)
	persisted   map[string]string // this replica's persistent workspaces: id -> directory
	onHeld      func()            // see OnHeld
	leftMounted []string          // images of a dead server's mounts New undid; see AwaitLeftMounted
	heldRunning atomic.Bool

	snapMu       sync.Mutex
	snapPromised map[string]int64 // principal -> bytes of its snapshots being made
	copying      int64            // bytes of the copies under way (reserveCopy)
}

// Session is one data session.
type Session struct {
	ID string
	// Principal is who the session belongs to, fixed when it is made (a
	// pooled session's when it is claimed): another principal's handle
	// naming it finds nothing. "" is the server's own.
	Principal string
	// Incarnation tells this session from an earlier one under the same
	// id (a caller may name its own ids, and reopen one after closing
	// it): a signed download link names the incarnation it was made for.
	Incarnation string
	Dir         string // state/workspaces/<random>
	Workspace   string // Dir/data, mounted at /mnt/data
	Cache       string // Dir/cache, the sandbox's ~/.cache (matplotlib's font cache, ...)
	Created     time.Time

	volume bool // Dir holds a filesystem of its own: the kernel bounds it
	owner  *Owner
	uid    int // the session's own host uid (and gid) when the server gives one

	mu       sync.Mutex
	closers  map[int]func() // runs to stop when the session ends
	nextID   int
	lastUsed time.Time
	pooled   bool          // in a warm pool: not counted, not expired, not found by Get
	storage  bool          // a file-storage session (LibreChat API): counted apart
	ttl      time.Duration // this session's idle TTL, when set
	busy     bool
	closed   bool
	audit    *os.File

	persist *persistent // a persistent workspace's hold on its directory (nil for others)
	resumed bool        // a persistent workspace resumed from storage
}

// sessionIDPattern: sess_, an optional replica name and _, 12 hex digits.
var sessionIDPattern = regexp.MustCompile(`^sess_(?:(` + ReplicaPattern + `)_)?[0-9a-f]{12}$`)

// ReplicaPattern is what a replica name (--replica-id) looks like: it
// rides in handles and proxy rules.
const ReplicaPattern = `[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?`

// ReplicaOf is the replica a session id names ("" for none).
func ReplicaOf(id string) string {
	if m := sessionIDPattern.FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return ""
}

// foreign refuses an id minted by another replica: a proxy sent it to the
// wrong one (or its replica is gone).
func (s *Registry) foreign(id string) error {
	if r := ReplicaOf(id); r != "" && r != s.cfg.Replica {
		return sessErr("session_not_found", "session %s belongs to replica %q, and this is replica %q: route calls by their Mcp-Param-Session-Id to the replica the handle names (if that replica is gone, so is the session)", id, r, s.cfg.Replica)
	}
	return nil
}

// newID mints a session id, naming this replica when it has a name.
func (s *Registry) newID() string {
	id := NewID()
	if s.cfg.Replica != "" {
		id = "sess_" + s.cfg.Replica + "_" + strings.TrimPrefix(id, "sess_")
	}
	return id
}

// New prepares the state directory: leftovers of a previous process
// (its sessions die with it) are removed first.
func New(cfg Config) (*Registry, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = 30 * time.Minute
	}
	if cfg.Max <= 0 {
		cfg.Max = 10
	}
	if cfg.PersistTTL <= 0 {
		cfg.PersistTTL = 7 * 24 * time.Hour
	}
	if cfg.MaxPersist <= 0 {
		cfg.MaxPersist = 64
	}
	if cfg.MaxPersistPerPrincipal <= 0 || cfg.MaxPersistPerPrincipal > cfg.MaxPersist {
		cfg.MaxPersistPerPrincipal = min(8, cfg.MaxPersist)
	}
	if cfg.StateDir == "" {
		return nil, errors.New("sessions: no state directory")
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	cfg.StateDir = abs
	// Each server keeps its sessions in its own instance directory under
	// sessions/, holding an flock on its lock file while it runs, so several
	// servers (a Claude Desktop and a Claude Code stdio server, say) can
	// share one state directory. An instance directory whose lock nobody
	// holds is a dead server's: its workspaces are removed.
	root := filepath.Join(cfg.StateDir, "sessions")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	// The state directory is the server's own: another user who could
	// write it (one who made it first, under /tmp) could plant the secret
	// download links are signed with, or a cache template every session
	// runs, or remove audit logs.
	for _, d := range []string{cfg.StateDir, root} {
		if err := opfile.CheckDir(d); err != nil {
			return nil, fmt.Errorf("refusing the state directory: %v", err)
		}
	}
	s := &Registry{cfg: cfg, open: map[string]*Session{}, stop: make(chan struct{}), ws: filepath.Join(cfg.StateDir, "workspaces")}
	if err := s.prepareWorkspaces(); err != nil {
		return nil, err
	}
	s.persistDir = cfg.PersistDir
	if s.persistDir == "" {
		s.persistDir = filepath.Join(cfg.StateDir, "persistent")
	}
	if err := s.preparePersist(); err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			_ = removeStale(filepath.Join(root, e.Name())) // a lock file each: what stays is tried again next time
		}
	}
	// Earlier servers built the cache template and probed runtimes in the
	// state directory itself: one killed while doing so left its
	// directory there.
	if ents, err := os.ReadDir(cfg.StateDir); err == nil {
		for _, e := range ents {
			if n := e.Name(); strings.HasPrefix(n, "cache-build-") || strings.HasPrefix(n, "cache-template") || strings.HasPrefix(n, "probe-") {
				_ = nofollow.RemoveAll(filepath.Join(cfg.StateDir, e.Name()))
			}
		}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	s.dir = filepath.Join(root, hex.EncodeToString(b))
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", s.dir, err)
	}
	s.lock = lock
	s.detachLeftovers()
	go s.sweepLoop()
	return s, nil
}

// StartVolumes makes the first volume now, to learn whether volumes work
// here (a root server in a container may not mount): if not, sessions
// are directories, and VolumeStatus says why. Sessions created before are
// directories. The server calls it once what it mounts over the
// workspaces directory is in place (the Docker backend's nosuid bind):
// a volume mounted before would be hidden under it.
func (s *Registry) StartVolumes() {
	if s.cfg.VolumeBytes <= 0 || s.ready != nil {
		return
	}
	if ok, why := volume.Supported(); !ok {
		s.cfg.VolumeBytes, s.volumeNote = 0, why
		return
	}
	dir, err := s.newVolume()
	if err != nil {
		s.cfg.VolumeBytes = 0
		s.volumeNote = "workspaces are directories with a watched quota: making a filesystem for one failed (" + err.Error() + ")"
		return
	}
	s.ready = make(chan string, readyVolumes)
	s.kick = make(chan struct{}, 1)
	s.ready <- dir
	s.filling = make(chan struct{})
	go func() {
		defer close(s.filling)
		s.fillVolumes()
	}()
}

// VolumeStatus describes how workspaces are bounded: each a filesystem of
// its own (ok), or a directory whose quota a watch enforces, and why.
func (s *Registry) VolumeStatus() (ok bool, note string) {
	if s.cfg.VolumeBytes > 0 {
		note = fmt.Sprintf("each workspace is an ext4 filesystem of its own holding %d bytes with its cache (a write past it fails with ENOSPC)", s.cfg.VolumeBytes)
		var st unix.Statfs_t
		if unix.Statfs(s.ws, &st) == nil {
			if free, want := int64(st.Bavail)*int64(st.Bsize), int64(s.cfg.Max)*s.cfg.VolumeBytes; free < want {
				note += fmt.Sprintf("; the state directory's disk has %d bytes free, less than --max-sessions (%d) workspaces filled to the quota: if they all fill, writes in one may fail with EIO", free, s.cfg.Max)
			}
		}
		return true, note
	}
	return false, s.volumeNote
}

// CacheTemplate is the directory copied into each new session's cache
// (caches built once by the server, such as matplotlib's font list), or ""
// while there is none.
func (s *Registry) CacheTemplate() string {
	t := filepath.Join(s.ws, cacheTemplate)
	if _, err := os.Stat(t); err != nil {
		return ""
	}
	return t
}

// cacheTemplate is the template's name among the workspaces (the same
// file system as the workspaces, which may be a mount of its own).
const cacheTemplate = ".cache-template"

// SetCacheTemplate installs dir (built by the caller in a MkdirTemp
// directory) as the cache template, replacing any older one.
func (s *Registry) SetCacheTemplate(dir string) error {
	t := filepath.Join(s.ws, cacheTemplate)
	old := t + ".old"
	_ = nofollow.RemoveAll(old)
	_ = os.Rename(t, old)
	defer nofollow.RemoveAll(old)
	return os.Rename(dir, t)
}

// MkdirTemp makes a new directory that sandboxes can reach like a
// workspace (the server's own preparatory runs use it). It lies among the
// workspaces and names this server, so a server killed while using it
// leaves nothing behind: the next one removes it with the other leftovers.
//
// The directory's name carries this server's instance (pattern, the
// instance, "-", random digits) and so does its instance file: a server
// killed between the two still left a directory that names its owner.
func (s *Registry) MkdirTemp(pattern string) (string, error) {
	d, err := os.MkdirTemp(s.ws, pattern+s.Instance()+"-")
	if err != nil {
		return "", err
	}
	err = os.Chmod(d, s.dirMode())
	if err == nil {
		err = os.WriteFile(filepath.Join(d, "instance"), []byte(s.Instance()), 0o600)
	}
	if err != nil {
		_ = nofollow.RemoveAll(d)
		return "", err
	}
	return d, nil
}

// Owner is who owns the sessions' files (nil: the server).
func (s *Registry) Owner() *Owner { return s.cfg.Owner }

// StateDir is the directory the sessions live in.
func (s *Registry) StateDir() string { return s.cfg.StateDir }

// Instance names this server's instance directory (see InstanceAlive).
func (s *Registry) Instance() string { return filepath.Base(s.dir) }

// InstanceAlive reports whether the server that owns instance under
// stateDir is running (it holds its lock). Sandboxes labelled with a dead
// instance are orphans.
func InstanceAlive(stateDir, instance string) bool {
	if stateDir == "" || instance == "" || strings.ContainsAny(instance, "/\\") || instance == ".." {
		return false
	}
	lock, err := os.OpenFile(filepath.Join(stateDir, "sessions", instance, "lock"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	return false
}

// OnEnd registers a function called when a session closes (to cancel its
// executions).
func (s *Registry) OnEnd(f func(*Session)) { s.onEnd = f }

// NewID returns a fresh sess_<12 hex> id.
func NewID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "sess_" + hex.EncodeToString(b)
}

// Get returns an open session, whoever it belongs to (the server's own
// use; a caller's handle goes through Lookup).
func (s *Registry) Get(id string) (*Session, error) { return s.get(id, nil) }

// get returns the open session id if it passes mine (nil: any), and
// counts the lookup as use of it.
func (s *Registry) get(id string, mine func(*Session) bool) (*Session, error) {
	if !sessionIDPattern.MatchString(id) {
		return nil, sessErr("session_not_found", "No active session with id %s (session ids look like sess_0123456789ab)", id)
	}
	if err := s.foreign(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.open[id]
	// Only a caller's lookup, its principal checked first, resumes a
	// suspended persistent workspace: the server's own (a signed link, a
	// listing) never mounts one, takes its lock or refreshes its use.
	if !ok && mine != nil {
		if m, err := s.persistedMeta(id); err == nil && mine(&Session{ID: id, Principal: m.Principal}) {
			ss, _, err := s.resumeByIDLocked(id)
			if err != nil || ss != nil {
				return ss, err
			}
		}
	}
	if !ok || ss.pooled || (mine != nil && !mine(ss)) {
		return nil, sessErr("session_not_found", "No active session with id %s", id)
	}
	ss.touch()
	return ss, nil
}

// GetOrCreate is Open for the server's own sessions (no principal).
func (s *Registry) GetOrCreate(id string) (*Session, bool, error) { return s.Open(id, "") }

// Open returns principal's session id, creating it for principal when id
// is "" (a fresh id) or names no open session (seed 000: a caller may name
// a new session). An open session of another principal is
// session_not_found, exactly like one that does not exist; so is an id
// naming this replica that is not open: only the server mints those (a
// caller choosing one could take an id the server is about to hand to
// someone else).
func (s *Registry) Open(id, principal string) (*Session, bool, error) {
	minted := id == ""
	if !minted && !sessionIDPattern.MatchString(id) {
		return nil, false, sessErr("invalid_session_id", "session_id %q must look like sess_ followed by 12 lowercase hex digits; omit it to get a new one", id)
	}
	if err := s.foreign(id); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if minted {
		id = s.newIDLocked()
	}
	if ss, ok := s.open[id]; ok {
		if ss.pooled || ss.Principal != principal {
			return nil, false, notFound(id)
		}
		ss.touch()
		return ss, false, nil
	}
	if m, err := s.persistedMeta(id); err == nil {
		if m.Principal != principal {
			return nil, false, notFound(id)
		}
		ss, _, err := s.resumeByIDLocked(id)
		if ss == nil && err == nil {
			err = notFound(id)
		}
		return ss, false, err
	}
	if !minted && s.persistentHolds(id) {
		// Another server sharing the persistent directory gave a
		// workspace this id: a caller naming it gets nothing of it.
		return nil, false, notFound(id)
	}
	if !minted && ReplicaOf(id) != "" {
		return nil, false, sessErr("session_not_found", "No active session with id %s: ids naming a replica are minted by the server, and this one is closed (omit session_id to get a new session)", id)
	}
	if s.draining {
		return nil, false, ErrDraining
	}
	if err := s.capLocked(principal); err != nil {
		return nil, false, err
	}
	ss, err := s.createLocked(id)
	if err != nil {
		return nil, false, err
	}
	ss.Principal = principal
	return ss, true, nil
}

// Lookup returns principal's open session id: another principal's is
// session_not_found, like one that does not exist.
func (s *Registry) Lookup(id, principal string) (*Session, error) {
	return s.get(id, func(ss *Session) bool { return ss.Principal == principal })
}

func notFound(id string) error {
	return sessErr("session_not_found", "No active session with id %s (session ids look like sess_0123456789ab)", id)
}

// capLocked refuses a new session past the server's cap or principal's
// share of it.
func (s *Registry) capLocked(principal string) error {
	if s.activeLocked() >= s.cfg.Max {
		return sessErr("max_sessions", "Maximum %d concurrent sessions reached. Close an existing session first.", s.cfg.Max)
	}
	if share := s.cfg.MaxPerPrincipal; share > 0 && share < s.cfg.Max {
		n := 0
		for _, ss := range s.open {
			if !ss.pooled && !ss.storage && ss.Principal == principal {
				n++
			}
		}
		if n >= share {
			return sessErr("max_sessions", "this API key holds %d open sessions, its share of the server's %d (SANDBOX_MAX_SESSIONS, shared between keys); close one first", n, s.cfg.Max)
		}
	}
	return nil
}

// CreatePooled makes a session for a warm pool: it does not count against
// the cap and never idles out until Claim hands it to a caller.
func (s *Registry) CreatePooled() (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil, ErrDraining
	}
	id := s.newID()
	for s.open[id] != nil {
		id = s.newID()
	}
	ss, err := s.createLocked(id)
	if err != nil {
		return nil, err
	}
	ss.pooled = true
	return ss, nil
}

// Claim turns a pooled session into principal's (under the cap and
// principal's share of it).
func (s *Registry) Claim(ss *Session, principal string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[ss.ID]; !ok || !ss.pooled {
		return sessErr("session_not_found", "the pooled session %s is gone", ss.ID)
	}
	if s.draining {
		return ErrDraining
	}
	if err := s.capLocked(principal); err != nil {
		return err
	}
	ss.pooled = false
	ss.Principal = principal
	ss.touch()
	return nil
}

// Drain stops the registry from creating sessions (the server is shutting
// down gracefully): the open ones stay usable until they are closed.
func (s *Registry) Drain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
}

// Draining tells whether Drain was called.
func (s *Registry) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// ErrCodeDraining is the error code of a session refused during a drain.
const ErrCodeDraining = "server_draining"

// ErrDraining refuses a new session during a drain (every door says the
// same: the MCP server's initialize as well).
var ErrDraining = sessErr(ErrCodeDraining, "this srt-mcp server is shutting down (draining): it finishes the runs it has but opens no new session; retry, and a load balancer sends the new session to another replica")

func (s *Registry) activeLocked() int {
	n := 0
	for _, ss := range s.open {
		if !ss.pooled && !ss.storage {
			n++
		}
	}
	return n
}

// CreateStorage makes a session that holds files for an API whose clients
// expect them to last (the LibreChat Code API: a day): it expires after
// ttl idle and counts against max such sessions, not against the cap of
// interactive sessions.
//
// The session belongs to principal from the start: nothing is adopted by
// whoever names it first.
//
// One principal holds at most perPrincipal of them (0: max): past that,
// its own least recently used stored session is closed to make room, so
// that no principal takes every place and none is ever locked out by its
// own.
func (s *Registry) CreateStorage(ttl time.Duration, max, perPrincipal int, principal string) (*Session, error) {
	if perPrincipal <= 0 || perPrincipal > max {
		perPrincipal = max
	}
	for {
		s.mu.Lock()
		if s.draining {
			s.mu.Unlock()
			return nil, ErrDraining
		}
		n, mine := 0, 0
		var lru *Session
		var lruLast time.Time
		for _, ss := range s.open {
			if !ss.storage {
				continue
			}
			n++
			if ss.Principal != principal {
				continue
			}
			mine++
			ss.mu.Lock()
			idle, last := !ss.busy, ss.lastUsed
			ss.mu.Unlock()
			if idle && (lru == nil || last.Before(lruLast)) {
				lru, lruLast = ss, last
			}
		}
		if mine >= perPrincipal {
			if lru == nil {
				s.mu.Unlock()
				return nil, sessErr("max_sessions", "this caller holds %d stored sessions, its most, and every one is in use; wait for a run to finish", mine)
			}
			delete(s.open, lru.ID)
			s.mu.Unlock()
			s.end(lru)
			continue
		}
		if n >= max {
			s.mu.Unlock()
			return nil, sessErr("max_sessions", "Maximum %d stored sessions reached; older ones expire after %s idle.", max, ttl)
		}
		id := s.newID()
		for s.open[id] != nil {
			id = s.newID()
		}
		ss, err := s.createLocked(id)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		ss.storage, ss.ttl, ss.Principal = true, ttl, principal
		s.mu.Unlock()
		return ss, nil
	}
}

func (s *Registry) createLocked(id string) (*Session, error) {
	inc := make([]byte, 8)
	_, _ = rand.Read(inc)
	ss := &Session{ID: id, Incarnation: hex.EncodeToString(inc), Created: time.Now(), lastUsed: time.Now()}
	ss.owner = s.cfg.Owner
	if s.cfg.UIDs != nil {
		uid, err := s.allocUIDLocked()
		if err != nil {
			return nil, err
		}
		ss.uid = uid
		ss.owner = &Owner{UID: uid, GID: uid}
	}
	fail := func(err error) (*Session, error) {
		if ss.uid != 0 {
			delete(s.uids, ss.uid)
		}
		return nil, err
	}
	if s.ready != nil {
		dir, err := s.takeVolume()
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return fail(sessErr("storage_full", "the server's storage cannot hold another workspace of %d bytes (SANDBOX_WORKSPACE_QUOTA); close a session, or free space on the server", s.cfg.VolumeBytes))
		}
		if err != nil {
			return fail(sessErr("internal_error", "could not make the new session's filesystem: %s", hostless(err)))
		}
		ss.volume, ss.Dir = true, dir
		ss.Workspace = filepath.Join(dir, volumeMount, volume.DataDir)
		ss.Cache = filepath.Join(dir, volumeMount, volume.CacheDir)
	} else {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		dir := filepath.Join(s.ws, hex.EncodeToString(b))
		ss.Dir, ss.Workspace, ss.Cache = dir, filepath.Join(dir, "data"), filepath.Join(dir, "cache")
		if err := os.Mkdir(dir, s.dirMode()); err != nil {
			return fail(err)
		}
		if err := os.Chmod(dir, s.dirMode()); err != nil { // past the umask
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "instance"), []byte(s.Instance()), 0o600); err != nil {
			os.RemoveAll(dir)
			return fail(err)
		}
		// The cache holds the session's installed packages too (on
		// PYTHONPATH from the start, so a kernel finds what
		// install_package adds later).
		for _, d := range []string{ss.Workspace, ss.Cache, filepath.Join(ss.Cache, "site-packages")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				os.RemoveAll(dir)
				return fail(err)
			}
		}
	}
	if t := s.CacheTemplate(); t != "" {
		_ = os.CopyFS(ss.Cache, os.DirFS(t)) // a head start only: a failure costs time, not correctness
	}
	if o := ss.owner; o != nil {
		for _, d := range []string{ss.Workspace, ss.Cache} {
			_ = filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
				if err == nil {
					err = os.Lchown(p, o.UID, o.GID)
				}
				return err
			})
		}
	}
	// The audit log outlives the session: the operator reads it later.
	if err := os.MkdirAll(AuditDir(s.cfg.StateDir), 0o700); err == nil {
		if f, err := os.OpenFile(AuditPath(s.cfg.StateDir, id), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			ss.audit = f
		}
	}
	s.open[id] = ss
	return ss, nil
}

// Close ends a session and removes its workspace.
func (s *Registry) Close(id string) error {
	s.mu.Lock()
	ss, ok := s.open[id]
	if ok {
		delete(s.open, id)
	}
	s.mu.Unlock()
	if !ok {
		return sessErr("session_not_found", "No active session with id %s", id)
	}
	s.end(ss)
	return nil
}

func (s *Registry) end(ss *Session) {
	s.stopSession(ss)
	// The workspace is a tree the sandbox wrote: removed without following
	// a link, at any depth, with a bounded number of open descriptors,
	// after its filesystem (if it has one) is unmounted.
	if ss.persist == nil {
		_ = removeWorkspace(ss.Dir)
	}
	if p := ss.persist; p != nil {
		_ = s.removePersistent(ss.Dir)
		p.lock.Close()
		s.mu.Lock()
		if s.persisted[ss.ID] == ss.Dir {
			delete(s.persisted, ss.ID)
		}
		s.mu.Unlock()
	}
	s.freeUID(ss)
}

// freeUID gives the session's uid back to the range.
func (s *Registry) freeUID(ss *Session) {
	if ss.uid != 0 {
		s.mu.Lock()
		delete(s.uids, ss.uid)
		s.mu.Unlock()
	}
}

// stopSession stops what runs in the session (its closers and the end
// hook) and closes its audit log.
func (s *Registry) stopSession(ss *Session) {
	ss.mu.Lock()
	ss.closed = true
	closers := ss.closers
	ss.closers = nil
	ss.mu.Unlock()
	for _, f := range closers {
		f()
	}
	if s.onEnd != nil {
		s.onEnd(ss)
	}
	ss.mu.Lock()
	if ss.audit != nil {
		ss.audit.Close()
		ss.audit = nil
	}
	ss.mu.Unlock()
}

// allocUIDLocked picks a uid from the range for a new session: random, so
// that two servers sharing a state directory do not walk the same ids, and
// never one this server uses or any process on the host runs as.
func (s *Registry) allocUIDLocked() (int, error) {
	r := s.cfg.UIDs
	if s.uids == nil {
		s.uids = map[int]bool{}
	}
	running := runningUIDs()
	for i := 0; i < 64; i++ {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		uid := r.First + int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))%r.Count
		if s.uids[uid] || running[uid] {
			continue
		}
		s.uids[uid] = true
		return uid, nil
	}
	return 0, sessErr("internal_error", "no free uid in %d..%d for a new session", r.First, r.First+r.Count-1)
}

// SessionUID returns a fresh uid from the range for a sandbox of the
// server's own (the cache template build), and a function that frees it;
// 0 when the server gives no uids.
func (s *Registry) SessionUID() (int, func()) {
	if s.cfg.UIDs == nil {
		return 0, func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, err := s.allocUIDLocked()
	if err != nil {
		return 0, func() {}
	}
	return uid, func() {
		s.mu.Lock()
		delete(s.uids, uid)
		s.mu.Unlock()
	}
}

// runningUIDs are the real uids of the host's processes.
func runningUIDs() map[int]bool {
	out := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		if i := bytes.Index(b, []byte("\nUid:\t")); i >= 0 {
			f := strings.Fields(string(b[i+6 : i+6+min(40, len(b)-i-6)]))
			if len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					out[n] = true
				}
			}
		}
	}
	return out
}

// UID is the session's own host uid (and gid), 0 when the server gives
// none.
func (ss *Session) UID() int { return ss.uid }

// OnClose registers f to run when the session ends (to stop a run that
// uses its workspace) and returns a function that unregisters it.
func (ss *Session) OnClose(f func()) (remove func()) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		go f()
		return func() {}
	}
	if ss.closers == nil {
		ss.closers = map[int]func(){}
	}
	id := ss.nextID
	ss.nextID++
	ss.closers[id] = f
	return func() {
		ss.mu.Lock()
		delete(ss.closers, id)
		ss.mu.Unlock()
	}
}

// Count returns the number of open sessions (pooled ones not included).
func (s *Registry) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.activeLocked()
}

func (s *Registry) sweepLoop() {
	every := min(30*time.Second, max(s.cfg.TTL/4, 100*time.Millisecond))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.Sweep(now)
			s.SweepSnapshots(now)
			s.SweepPersistent(now)
		}
	}
}

// Sweep closes sessions idle longer than the TTL (a running session is
// never idle).
func (s *Registry) Sweep(now time.Time) int {
	var expired []*Session
	s.mu.Lock()
	for id, ss := range s.open {
		ss.mu.Lock()
		ttl := s.cfg.TTL
		if ss.ttl > 0 {
			ttl = ss.ttl
		}
		idle := !ss.busy && !ss.pooled && now.Sub(ss.lastUsed) > ttl
		ss.mu.Unlock()
		if idle {
			delete(s.open, id)
			expired = append(expired, ss)
		}
	}
	s.mu.Unlock()
	for _, ss := range expired {
		if ss.persist != nil {
			s.suspend(ss) // its files stay until PersistTTL
			continue
		}
		s.end(ss)
	}
	return len(expired)
}

// Shutdown closes every session.
func (s *Registry) Shutdown() {
	s.once.Do(func() { close(s.stop) })
	s.mu.Lock()
	all := s.open
	s.open = map[string]*Session{}
	s.mu.Unlock()
	for _, ss := range all {
		if ss.persist != nil {
			s.suspend(ss)
			continue
		}
		s.end(ss)
	}
	if s.filling != nil {
		<-s.filling
		s.dropReady()
	}
	// A freeze a snapshot gave up on may still be waiting for a writer the
	// sessions' ends just stopped: it thaws the filesystem when it ends.
	volume.Settle(10 * time.Second)
	if s.lock != nil {
		_ = nofollow.RemoveAll(s.dir)
		s.lock.Close()
		s.lock = nil
	}
}

// dirMode is the mode of the directories on the way to a workspace.
func (s *Registry) dirMode() os.FileMode {
	if s.cfg.Reach {
		return 0o711
	}
	return 0o700
}

// prepareWorkspaces creates the workspaces directory and, when sandboxes
// reach their workspaces as another user, makes the state directory and it
// searchable (not listable) by that user, and checks every directory above.
func (s *Registry) prepareWorkspaces() error {
	if err := os.MkdirAll(s.ws, s.dirMode()); err != nil {
		return err
	}
	if err := opfile.CheckDir(s.ws); err != nil {
		return fmt.Errorf("refusing the workspaces directory: %v", err)
	}
	if fi, err := os.Lstat(AuditDir(s.cfg.StateDir)); err == nil && fi.IsDir() {
		if err := opfile.CheckDir(AuditDir(s.cfg.StateDir)); err != nil {
			return fmt.Errorf("refusing the audit directory: %v", err)
		}
	}
	if !s.cfg.Reach {
		return nil
	}
	for _, d := range []string{s.cfg.StateDir, s.ws} {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return err
			}
		}
	}
	abs, err := filepath.Abs(s.cfg.StateDir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s, above the state directory, is not searchable by others (mode %v): the sandbox user cannot reach its workspace; use a state directory under searchable directories (the default /var/lib/srt-mcp), or chmod o+x %s", p, fi.Mode().Perm(), p)
		}
		if p == "/" {
			return nil
		}
	}
}

// RemoveLeftovers removes the workspaces of servers that are gone (their
// instance lock is not held) and returns how many. Start-up runs it in the
// background, after the containers that could still write them are gone:
// nothing a previous server left (a deep tree, a busy writer) can hold the
// next one up.
func (s *Registry) RemoveLeftovers() (int, error) {
	ents, err := os.ReadDir(s.ws)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range ents {
		if !s.leftover(e.Name()) {
			continue
		}
		if err := removeWorkspace(filepath.Join(s.ws, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// leftover reports whether the workspaces directory's entry name is a dead
// server's.
func (s *Registry) leftover(name string) bool {
	if strings.HasPrefix(name, cacheTemplate) {
		return false // the servers' shared template
	}
	p := filepath.Join(s.ws, name)
	owner := ""
	if d, err := nofollow.OpenDir(p); err == nil {
		b, err := d.ReadFile("instance", 256)
		d.Close()
		if err == nil {
			owner = string(b)
		}
	}
	if owner == "" {
		owner = instanceInName(name) // a MkdirTemp directory its server left before its instance file
	}
	if owner == s.Instance() || (owner != "" && InstanceAlive(s.cfg.StateDir, owner)) {
		return false
	}
	if fi, err := os.Lstat(p); err == nil && owner == "" && fi.IsDir() && time.Since(fi.ModTime()) < time.Minute {
		return false // a server creating it right now
	}
	return true
}

// detachLeftovers unmounts the volumes of dead servers' workspaces (the
// rest of them goes later, in RemoveLeftovers): before anything is
// mounted over the workspaces directory, which would hide them for good.
func (s *Registry) detachLeftovers() {
	ents, _ := os.ReadDir(s.ws)
	for _, e := range ents {
		if mnt := filepath.Join(s.ws, e.Name(), volumeMount); volume.Mounted(mnt) && s.leftover(e.Name()) {
			volume.Thaw(mnt) // a server killed in a snapshot's copy left it frozen
			_ = volume.Unmount(mnt)
		}
	}
}

// instanceInName is the instance a MkdirTemp directory's name carries
// ("" for none): 16 hex digits between dashes.
func instanceInName(name string) string {
	parts := strings.Split(name, "-")
	for _, p := range parts[1:] {
		if len(p) == 16 && strings.Trim(p, "0123456789abcdef") == "" {
			return p
		}
	}
	return ""
}

// removeStale removes an instance directory whose server is gone (nobody
// holds its lock). A live server's directory is left alone.
func removeStale(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return nofollow.RemoveAll(dir)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	switch {
	case err == nil:
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return nil // a live server
		}
	case time.Since(fi.ModTime()) < time.Minute:
		return nil // a server starting right now, before its lock exists
	}
	return nofollow.RemoveAll(dir)
}

func (ss *Session) touch() {
	ss.mu.Lock()
	ss.lastUsed = time.Now()
	ss.mu.Unlock()
}

// SetTTL gives the session its own idle TTL.
func (ss *Session) SetTTL(d time.Duration) {
	ss.mu.Lock()
	ss.ttl = d
	ss.mu.Unlock()
}

// ExpiresAt is when the session closes if it stays idle.
func (s *Registry) ExpiresAt(ss *Session) time.Time {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ttl := s.cfg.TTL
	if ss.ttl > 0 {
		ttl = ss.ttl
	}
	return ss.lastUsed.Add(ttl)
}

// Acquire marks the session busy for one run; release with Release.
func (ss *Session) Acquire() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return sessErr("session_not_found", "Session %s was closed", ss.ID)
	}
	if ss.busy {
		return sessErr("session_busy", "A run is already in progress for this session. Wait for it to complete.")
	}
	ss.busy = true
	ss.lastUsed = time.Now()
	return nil
}

// Busy reports whether a run holds the session.
func (ss *Session) Busy() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.busy
}

// Closed reports whether the session has ended.
func (ss *Session) Closed() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.closed
}

// Release ends a run.
func (ss *Session) Release() {
	ss.mu.Lock()
	ss.busy = false
	ss.lastUsed = time.Now()
	ss.mu.Unlock()
}

// Audit appends one JSON line to the session's audit log.
func (ss *Session) Audit(line []byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.audit != nil {
		_, _ = ss.audit.Write(append(line, '\n'))
	}
}

// AuditDir holds one audit log per session (JSON lines), kept after the
// session ends; `srt-mcp audit` prints them.
func AuditDir(stateDir string) string { return filepath.Join(stateDir, "audit") }

// AuditPath is a session's audit log.
func AuditPath(stateDir, sessionID string) string {
	return filepath.Join(AuditDir(stateDir), sessionID+".jsonl")
}

// FileInfo describes one workspace file.
type FileInfo struct {
	Path     string    `json:"path"`
	Filename string    `json:"filename"`
	Size     int64     `json:"size_bytes"`
	MIME     string    `json:"mime_type"`
	ModTime  time.Time `json:"-"`
}

// CleanName validates a filename or a /mnt/data path given by a caller and
// returns its path relative to the workspace. It rejects traversal,
// absolute paths outside /mnt/data, NUL and control bytes, and hidden
// traversal through "." segments.
func CleanName(name string) (string, error) {
	bad := func(why string) (string, error) {
		return "", sessErr("invalid_path", "%q: %s", name, why)
	}
	switch {
	case name == "":
		return bad("empty name")
	case strings.ContainsRune(name, 0):
		return bad("contains a NUL byte")
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case strings.ContainsRune(name, '\\'):
		return bad("contains a backslash")
	case strings.IndexFunc(name, unsafeNameRune) >= 0:
		return bad("contains a control or direction-changing character")
	}
	rel := name
	if strings.HasPrefix(name, "/") {
		if name != WorkspaceMount && !strings.HasPrefix(name, WorkspaceMount+"/") {
			return bad("absolute paths must be inside " + WorkspaceMount)
		}
		rel = strings.TrimPrefix(strings.TrimPrefix(name, WorkspaceMount), "/")
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == ".." {
			return bad("path traversal (..) is not allowed")
		}
	}
	rel = path.Clean(rel)
	if rel == "." || rel == "" || strings.HasPrefix(rel, "../") {
		return bad("names no file inside " + WorkspaceMount)
	}
	if len(rel) > 1024 {
		return bad("longer than 1024 bytes")
	}
	return rel, nil
}

// SafeName is a name a sandbox made, made safe to show a client (see
// package printable): ok reports whether the name needed no escape (only
// such names can be read back: CleanName refuses the others).
func SafeName(name string) (safe string, ok bool) { return printable.Name(name) }

// unsafeNameRune: control characters (C0, DEL, C1), the Unicode
// direction overrides and isolates and the line and paragraph separators,
// which make a name read as another.
func unsafeNameRune(r rune) bool { return printable.Unsafe(r) }

// fileErr turns an error of a workspace operation on rel into a session
// error that says what went wrong.
func fileErr(rel string, err error) error {
	var se *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return err
	case errors.Is(err, nofollow.ErrSymlink):
		return sessErr("invalid_path", "%s/%s: a symbolic link is on the way; files are only read and written through real directories, so a link planted by earlier code cannot lead anywhere; nothing was read or written", WorkspaceMount, rel)
	case errors.Is(err, fs.ErrNotExist):
		return sessErr("not_found", "No artifact at %s/%s", WorkspaceMount, rel)
	case errors.Is(err, syscall.ENOTDIR):
		return sessErr("invalid_path", "a parent of %s/%s is a file, not a directory", WorkspaceMount, rel)
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return sessErr("storage_full", "the server's storage is full; nothing was written to %s/%s (free space on the server, or remove files from the session)", WorkspaceMount, rel)
	case errors.Is(err, syscall.EFBIG):
		return sessErr("too_large", "%s/%s would be larger than the server allows", WorkspaceMount, rel)
	}
	// Never a host path in a message: only what went wrong.
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return sessErr("internal_error", "%s/%s: %v", WorkspaceMount, rel, pe.Err)
	}
	return sessErr("internal_error", "%s/%s: %v", WorkspaceMount, rel, err)
}

// workspace opens the workspace directory itself (the server made it, under
// the state directory); every operation below it resolves one component at
// a time and never follows a link, even one swapped in while it runs.
func (ss *Session) workspace() (*nofollow.Dir, error) {
	d, err := nofollow.OpenTrusted(ss.Workspace)
	if err != nil {
		return nil, sessErr("session_not_found", "Session %s has no workspace (closed?)", ss.ID)
	}
	return d, nil
}

// parentOf opens the directory that holds rel (creating the missing ones,
// owned by the session's owner, when create is set) and returns it with
// rel's last name.
func (ss *Session) parentOf(root *nofollow.Dir, rel string, create bool) (*nofollow.Dir, string, error) {
	dir, base := path.Split(rel)
	cur, err := root.Walk(".")
	if err != nil {
		return nil, "", err
	}
	for _, c := range strings.Split(strings.Trim(dir, "/"), "/") {
		if c == "" {
			continue
		}
		next, err := cur.Sub(c)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err = cur.Mkdir(c, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
				if ss.owner != nil {
					_ = cur.Chown(c, ss.owner.UID, ss.owner.GID)
				}
				next, err = cur.Sub(c)
			}
		}
		cur.Close()
		if err != nil {
			return nil, "", err
		}
		cur = next
	}
	return cur, base, nil
}

// WriteFile writes data atomically (a temporary file renamed into place) at
// rel and returns its /mnt/data path. Nothing is written when rel exists
// and overwrite is false, or when a link is on the way.
func (ss *Session) WriteFile(rel string, data []byte, overwrite bool) (string, error) {
	root, err := ss.workspace()
	if err != nil {
		return "", err
	}
	defer root.Close()
	dir, base, err := ss.parentOf(root, rel, true)
	if err != nil {
		return "", ss.writeErr(rel, int64(len(data)), err)
	}
	defer dir.Close()
	if st, err := dir.Lstat(base); err == nil {
		switch {
		case st.Mode&fs.ModeSymlink != 0:
			return "", sessErr("invalid_path", "%s/%s is a symlink; only regular files are read and written", WorkspaceMount, rel)
		case !overwrite:
			return "", sessErr("file_exists", "%s already exists. Set overwrite=true to replace.", rel)
		case st.IsDir():
			return "", sessErr("invalid_path", "%s/%s is a directory", WorkspaceMount, rel)
		}
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := ".upload-" + hex.EncodeToString(b)
	f, err := dir.OpenFile(tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644)
	if err != nil {
		return "", ss.writeErr(rel, int64(len(data)), err)
	}
	_, werr := f.Write(data)
	if werr == nil && ss.owner != nil {
		werr = f.Chown(ss.owner.UID, ss.owner.GID)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		// renameat replaces whatever is at base (a link included: the
		// link goes, its target is untouched).
		werr = unix.Renameat(dir.Fd(), tmp, dir.Fd(), base)
	}
	if werr != nil {
		_ = dir.Remove(tmp)
		return "", ss.writeErr(rel, int64(len(data)), werr)
	}
	return WorkspaceMount + "/" + rel, nil
}

// Remove deletes a workspace file (never through a link).
func (ss *Session) Remove(rel string) error {
	root, err := ss.workspace()
	if err != nil {
		return err
	}
	defer root.Close()
	dir, base, err := ss.parentOf(root, rel, false)
	if err != nil {
		return fileErr(rel, err)
	}
	defer dir.Close()
	if st, err := dir.Lstat(base); err == nil && st.IsDir() {
		return sessErr("invalid_path", "%s/%s is a directory", WorkspaceMount, rel)
	}
	return fileErr(rel, dir.Remove(base))
}

// ReadFile reads a regular workspace file of at most max bytes (0: no
// limit); a larger file is artifact_too_large with its FileInfo.
func (ss *Session) ReadFile(rel string, max int64) ([]byte, FileInfo, error) {
	f, info, err := ss.Open(rel)
	if err != nil {
		return nil, info, err
	}
	defer f.Close()
	if max > 0 && info.Size > max {
		return nil, info, sessErr("artifact_too_large", "%s is %s, exceeds %s limit. Use download_url instead.", path.Base(rel), human(info.Size), human(max))
	}
	data, err := io.ReadAll(io.LimitReader(f, info.Size))
	return data, info, err
}

// Open opens a regular workspace file for reading: no link anywhere on the
// way, and only a regular file (never a FIFO or device a run planted).
func (ss *Session) Open(rel string) (*os.File, FileInfo, error) {
	root, err := ss.workspace()
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer root.Close()
	dir, base, err := ss.parentOf(root, rel, false)
	if err != nil {
		return nil, FileInfo{}, fileErr(rel, err)
	}
	defer dir.Close()
	if st, err := dir.Lstat(base); err == nil && st.Mode&fs.ModeSymlink != 0 {
		return nil, FileInfo{}, sessErr("invalid_path", "%s/%s is a symlink; only regular files are read and written", WorkspaceMount, rel)
	}
	f, err := dir.OpenFile(base, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, FileInfo{}, fileErr(rel, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, FileInfo{}, sessErr("not_found", "No artifact at %s/%s (not a regular file)", WorkspaceMount, rel)
	}
	return f, fileInfo(rel, fi), nil
}

// maxListedName is the longest name a listing holds: CleanName's bound,
// past which no tool can name the file anyway. A run may make deeper ones
// (the walk goes past PATH_MAX); they count against the quota but are
// not listed, so a listing's memory follows its entries, not their depth.
const maxListedName = 1024

// listed is a regular file's FileInfo for a listing (nil: not listed);
// Filename is Path's own tail, not a second copy.
func listed(rel string, st nofollow.Stat) *FileInfo {
	if !st.Mode.IsRegular() || len(rel) > maxListedName {
		return nil
	}
	p := WorkspaceMount + "/" + rel
	return &FileInfo{Path: p, Filename: p[len(WorkspaceMount)+1:], Size: st.Size, MIME: MIMEType(rel), ModTime: st.Mtime}
}

// List returns the workspace's regular files (recursively, at most
// MaxFiles entries walked), sorted.
func (ss *Session) List() []FileInfo {
	var out []FileInfo
	_, _ = ss.walk(func(rel string, st nofollow.Stat) {
		if f := listed(rel, st); f != nil {
			out = append(out, *f)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Listing is the workspace listing used for artifact detection.
type Listing map[string]FileInfo

// Listing lists the workspace by path.
func (ss *Session) Listing() Listing {
	m := Listing{}
	for _, f := range ss.List() {
		m[f.Path] = f
	}
	return m
}

// Artifacts are files new or changed (size or mtime) since before.
func (ss *Session) Artifacts(before Listing) []FileInfo {
	var out []FileInfo
	for _, f := range ss.List() {
		if b, ok := before[f.Path]; !ok || b.Size != f.Size || !b.ModTime.Equal(f.ModTime) {
			out = append(out, f)
		}
	}
	return out
}

// Changed are the files of after new or changed (size or mtime) since
// before, sorted by path: Artifacts from two listings at hand.
func Changed(before, after Listing) []FileInfo {
	var out []FileInfo
	for p, f := range after {
		if b, ok := before[p]; !ok || b.Size != f.Size || !b.ModTime.Equal(f.ModTime) {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func fileInfo(rel string, fi fs.FileInfo) FileInfo {
	return FileInfo{Path: WorkspaceMount + "/" + rel, Filename: rel, Size: fi.Size(), MIME: MIMEType(rel), ModTime: fi.ModTime()}
}

// MIMEType guesses a file's type from its extension.
func MIMEType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	known := map[string]string{
		".csv": "text/csv", ".json": "application/json", ".txt": "text/plain", ".md": "text/markdown",
		".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml",
		".pdf": "application/pdf", ".html": "text/html", ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		".parquet": "application/vnd.apache.parquet", ".py": "text/x-python", ".zip": "application/zip",
	}
	if t, ok := known[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%gMB", float64(n*10/(1<<20))/10)
	case n >= 1<<10:
		return fmt.Sprintf("%gKB", float64(n*10/(1<<10))/10)
	}
	return fmt.Sprintf("%dB", n)
}
