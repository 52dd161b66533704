package sessions

// Named, persistent workspaces: a session created with a name and
// persist outlives its server. It lives in the persistent directory
// (Config.PersistDir, shared by replicas when it is on storage they all
// reach), not among the server's own workspaces:
//
//	<persist>/<p>/meta.json   its handle, name, principal, uid, last use (written atomically)
//	<persist>/<p>/lock        flock held by the server that has it open
//	<persist>/<p>/image, fs/  its filesystem (a root server), or
//	<persist>/<p>/data/, cache/  its directories
//
// An open persistent session is suspended, not removed, when it idles
// past its TTL or its server shuts down: its interpreters stop, its
// filesystem is unmounted, its lock released. It resumes on the next call
// naming its handle (on the replica the handle names), or on any server
// sharing the directory through create_session with its name, which gives
// it a handle of that server. A suspended workspace idle past PersistTTL
// is removed. After a crash the next server finds it as the crash left it
// (ext4's journal makes the filesystem whole again on its next mount).

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/opfile"
	"github.com/srt-mcp/srt-mcp/printable"
	"github.com/srt-mcp/srt-mcp/volume"
)

// persistMeta is a persistent workspace's record (meta.json).
type persistMeta struct {
	ID        string    `json:"session_id"`
	Name      string    `json:"name"`
	Principal string    `json:"principal"`
	UID       int       `json:"uid,omitempty"`
	Volume    bool      `json:"volume"`
	Created   time.Time `json:"created_at"`
	LastUsed  time.Time `json:"last_used"`
	// MountedOn is the boot id of the kernel that has its filesystem
	// mounted ("" when it is not): a server of another machine must not
	// mount it too.
	MountedOn string `json:"mounted_on,omitempty"`
}

// persistent is an open persistent session's hold on its directory.
type persistent struct {
	lock *os.File // flock held while this server has it open
	meta persistMeta
}

// WorkspaceInfo describes a workspace a principal holds.
type WorkspaceInfo struct {
	ID       string    `json:"session_id"`
	Name     string    `json:"name,omitempty"`
	Persist  bool      `json:"persist"`
	State    string    `json:"state"` // active, suspended, or elsewhere (open on another server)
	Bytes    int64     `json:"size_bytes"`
	Created  time.Time `json:"created_at"`
	LastUsed time.Time `json:"last_used"`
	Expires  time.Time `json:"expires_at"`
}

// OnHeld registers f, run (in the background, one at a time) when a
// persistent workspace cannot be resumed because a dead server's
// sandboxes still hold its filesystem: the Docker backend removes the
// containers of dead servers of other state directories.
func (s *Registry) OnHeld(f func()) { s.onHeld = f }

// PersistDir is where persistent workspaces live.
func (s *Registry) PersistDir() string { return s.persistDir }

// preparePersist makes the persistent directory (searchable by the
// sandbox user where workspaces must be) and indexes the workspaces of
// this replica in it.
func (s *Registry) preparePersist() error {
	if err := os.MkdirAll(s.persistDir, s.dirMode()); err != nil {
		return err
	}
	// One path for the directory, links resolved: the records are read
	// through it, and replicas compare what they mounted by it.
	abs, err := filepath.Abs(s.persistDir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return err
	}
	s.persistDir = abs
	if err := opfile.CheckDir(s.persistDir); err != nil {
		return fmt.Errorf("refusing the persistent workspaces directory: %v", err)
	}
	if s.cfg.Reach {
		fi, err := os.Stat(s.persistDir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(s.persistDir, fi.Mode().Perm()|0o011); err != nil {
				return err
			}
		}
	}
	s.persisted = map[string]string{}
	var held []string
	s.scanPersist(func(dir string, m persistMeta) bool {
		if ReplicaOf(m.ID) == s.cfg.Replica {
			s.persisted[m.ID] = dir
		}
		// A dead server's mount (its lock is free): unmounted now, so its
		// loop device is gone by the first call that resumes it.
		if mnt := filepath.Join(dir, volumeMount); volume.Mounted(mnt) {
			if lock, err := lockPersist(dir); err == nil {
				volume.Thaw(mnt)
				_ = volume.Unmount(mnt)
				lock.Close()
				held = append(held, filepath.Join(dir, "image"))
			}
		}
		return true
	})
	s.leftMounted = held
	return nil
}

// AwaitLeftMounted waits, for d at most, until the filesystems of the
// persistent workspaces a dead server left mounted (unmounted lazily by
// New) have let go of their images. A server restarted right after a
// crash starts while the kernel still tears down the dead server's
// sandboxes, whose mount namespaces hold those filesystems (on a machine
// busy with I/O, ext4's unmount takes seconds): without the wait the
// first call to resume one would find it held (session_busy). Called
// once the backend has removed the dead server's containers, before the
// server takes calls; it returns how many are still held.
func (s *Registry) AwaitLeftMounted(d time.Duration) int {
	images := s.leftMounted
	s.leftMounted = nil
	return len(stillBacked(images, d))
}

// stillBacked waits, for d at most, until no loop device is backed by any
// of images (their filesystems were unmounted lazily and end once nothing
// holds them), and returns those still backed.
func stillBacked(images []string, d time.Duration) []string {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		held := images[:0]
		for _, image := range images {
			if loopBacked(image) {
				held = append(held, image)
			}
		}
		images = held
		if len(images) == 0 || time.Now().After(deadline) {
			return images
		}
	}
}

// removePersistent removes a persistent workspace's directory (its lock
// held by the caller): renamed out of the way first, so that no server
// opens its lock file, or resumes it, while it is being removed.
func (s *Registry) removePersistent(dir string) error {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	gone := filepath.Join(s.persistDir, ".gone-"+hex.EncodeToString(b))
	if err := os.Rename(dir, gone); err != nil {
		return err
	}
	return removeWorkspace(gone)
}

// scanPersist calls fn with each persistent workspace's directory and
// record, until fn returns false.
func (s *Registry) scanPersist(fn func(dir string, m persistMeta) bool) {
	ents, _ := os.ReadDir(s.persistDir)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(s.persistDir, e.Name())
		if m, err := readPersistMeta(dir); err == nil && !fn(dir, m) {
			return
		}
	}
}

func readPersistMeta(dir string) (persistMeta, error) {
	var m persistMeta
	// The persistent directory is the operator's (links in its path are
	// followed, as for the state directory); an entry in it never is.
	parent, err := nofollow.OpenTrusted(filepath.Dir(dir))
	if err != nil {
		return m, err
	}
	d, err := parent.Sub(filepath.Base(dir))
	parent.Close()
	if err != nil {
		return m, err
	}
	b, err := d.ReadFile("meta.json", 64<<10)
	d.Close()
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil || !sessionIDPattern.MatchString(m.ID) {
		return m, fmt.Errorf("a broken meta.json in %s", filepath.Base(dir))
	}
	return m, nil
}

// writePersistMeta replaces dir's meta.json atomically.
func writePersistMeta(dir string, m persistMeta) error {
	b, _ := json.Marshal(m)
	tmp := filepath.Join(dir, ".meta.json.new")
	_ = os.Remove(tmp)
	if err := writeFileSync(tmp, b); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "meta.json"))
}

// lockPersist takes dir's lock, or says that another server has it open.
func lockPersist(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR|noFollow, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, errHeldElsewhere
	}
	return f, nil
}

var errHeldElsewhere = errors.New("held by another server")

// heldErr is the error for a workspace another server has open.
func heldErr(m persistMeta) error {
	where := "another srt-mcp server sharing its persistent directory"
	if r := ReplicaOf(m.ID); r != "" {
		where = "replica " + r
	}
	return sessErr("session_busy", "workspace %s (%s) is open on %s: use its handle there, or wait until it idles out and is suspended", printable.String(m.Name), m.ID, where)
}

// CreatePersistent returns principal's persistent workspace named name,
// creating it when principal has none (created says which): an open one
// as it is, a suspended one resumed (a handle of this server when another
// server made it).
func (s *Registry) CreatePersistent(principal, name string) (ss *Session, created bool, err error) {
	if err := CheckLabel(name); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Servers sharing the directory decide on names and bounds one at a
	// time: two creations of one name never both see it free.
	dirLock, err := os.OpenFile(filepath.Join(s.persistDir, ".lock"), os.O_CREATE|os.O_RDWR|noFollow, 0o600)
	if err != nil {
		return nil, false, sessErr("internal_error", "locking the persistent directory: %s", hostless(err))
	}
	defer dirLock.Close()
	if err := syscall.Flock(int(dirLock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, false, sessErr("internal_error", "locking the persistent directory: %s", hostless(err))
	}
	for _, o := range s.open {
		if o.persist != nil && o.Principal == principal && o.persist.meta.Name == name {
			o.touch()
			return o, false, nil
		}
	}
	var found string
	var fm persistMeta
	mine, total := 0, 0
	s.scanPersist(func(dir string, m persistMeta) bool {
		total++
		if m.Principal == principal {
			mine++
			if m.Name == name && found == "" {
				found, fm = dir, m
			}
		}
		return true
	})
	if s.draining {
		return nil, false, ErrDraining
	}
	if err := s.capLocked(principal); err != nil {
		return nil, false, err
	}
	if found != "" {
		newID := ""
		if ReplicaOf(fm.ID) != s.cfg.Replica {
			newID = s.newIDLocked() // another replica's: this one's handle from now on
		}
		ss, err := s.resumeLocked(found, fm, newID)
		return ss, false, err
	}
	if total >= s.cfg.MaxPersist {
		return nil, false, sessErr("max_sessions", "the server holds %d persistent workspaces, its most (--max-persistent); destroy_session one first", total)
	}
	if mine >= s.cfg.MaxPersistPerPrincipal {
		return nil, false, sessErr("max_sessions", "this caller holds %d persistent workspaces, its most (--max-persistent-per-caller); list_workspaces lists them, destroy_session one first", mine)
	}
	ss, err = s.createPersistentLocked(principal, name)
	return ss, err == nil, err
}

// newIDLocked mints an id no open or persistent session has.
func (s *Registry) newIDLocked() string {
	for {
		id := s.newID()
		if s.open[id] == nil && s.persisted[id] == "" {
			return id
		}
	}
}

func (s *Registry) createPersistentLocked(principal, name string) (*Session, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	dir := filepath.Join(s.persistDir, hex.EncodeToString(b))
	if err := os.Mkdir(dir, s.dirMode()); err != nil {
		return nil, err
	}
	ok := false
	var lock *os.File
	defer func() {
		if !ok {
			_ = removeWorkspace(dir)
			if lock != nil {
				lock.Close()
			}
		}
	}()
	if err := os.Chmod(dir, s.dirMode()); err != nil {
		return nil, err
	}
	lock, err := lockPersist(dir)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	m := persistMeta{ID: s.newIDLocked(), Name: name, Principal: principal, Volume: s.ready != nil, Created: now, LastUsed: now}
	if m.Volume {
		err = s.formatVolumeIn(dir)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return nil, sessErr("storage_full", "the server's storage cannot hold another workspace of %d bytes (SANDBOX_WORKSPACE_QUOTA); destroy a workspace, or free space on the server", s.cfg.VolumeBytes)
		}
		if err != nil {
			return nil, sessErr("internal_error", "could not make the workspace's filesystem: %s", hostless(err))
		}
		m.MountedOn = bootID()
	} else {
		for _, d := range []string{"data", "cache", filepath.Join("cache", "site-packages")} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
				return nil, err
			}
		}
	}
	ss := s.persistSession(dir, m, lock)
	if s.cfg.UIDs != nil {
		uid, err := s.allocUIDLocked()
		if err != nil {
			return nil, err
		}
		ss.uid, ss.owner = uid, &Owner{UID: uid, GID: uid}
		ss.persist.meta.UID = uid
	}
	if t := s.CacheTemplate(); t != "" {
		_ = os.CopyFS(ss.Cache, os.DirFS(t)) // a head start only
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
	if err := writePersistMeta(dir, ss.persist.meta); err != nil {
		if ss.uid != 0 {
			delete(s.uids, ss.uid)
		}
		return nil, fullOr(err, "recording the workspace")
	}
	ok = true
	ss.openAudit(s.cfg.StateDir)
	s.open[ss.ID] = ss
	s.persisted[ss.ID] = dir
	return ss, nil
}

// persistSession is the Session of persistent directory dir.
func (s *Registry) persistSession(dir string, m persistMeta, lock *os.File) *Session {
	inc := make([]byte, 8)
	_, _ = rand.Read(inc)
	ss := &Session{ID: m.ID, Principal: m.Principal, Incarnation: hex.EncodeToString(inc), Dir: dir, Created: m.Created,
		lastUsed: time.Now(), owner: s.cfg.Owner, volume: m.Volume}
	if m.Volume {
		ss.Workspace = filepath.Join(dir, volumeMount, volume.DataDir)
		ss.Cache = filepath.Join(dir, volumeMount, volume.CacheDir)
	} else {
		ss.Workspace, ss.Cache = filepath.Join(dir, "data"), filepath.Join(dir, "cache")
	}
	ss.persist = &persistent{lock: lock, meta: m}
	return ss
}

// openAudit opens the session's audit log (kept after it).
func (ss *Session) openAudit(stateDir string) {
	if err := os.MkdirAll(AuditDir(stateDir), 0o700); err == nil {
		if f, err := os.OpenFile(AuditPath(stateDir, ss.ID), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			ss.audit = f
		}
	}
}

// resumeLocked opens the suspended persistent workspace in dir (record m,
// as read before) for its principal, under newID when it is not "" (it
// moves to this server).
func (s *Registry) resumeLocked(dir string, m persistMeta, newID string) (*Session, error) {
	lock, err := lockPersist(dir)
	if errors.Is(err, errHeldElsewhere) {
		return nil, heldErr(m)
	}
	if err != nil {
		return nil, sessErr("internal_error", "opening the workspace: %s", hostless(err))
	}
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	// Read again under the lock: the server that held it may have
	// changed it (suspended it, or given it another handle) meanwhile.
	cur, err := readPersistMeta(dir)
	if err != nil {
		return nil, sessErr("internal_error", "reading the workspace's record: %s", hostless(err))
	}
	if cur.Principal != m.Principal || cur.Name != m.Name || cur.ID != m.ID {
		return nil, notFound(m.ID)
	}
	if newID != "" {
		cur.ID = newID
	}
	if s.open[cur.ID] != nil {
		// A session of that id is open here (a caller named it, or
		// another server sharing the directory minted it too): the
		// workspace gets a new handle rather than take another's.
		cur.ID = s.newIDLocked()
	}
	recoverReplace(dir)
	if cur.Volume {
		if err := s.mountPersistent(dir, &cur); err != nil {
			return nil, err
		}
	}
	ss := s.persistSession(dir, cur, lock)
	if s.cfg.UIDs != nil {
		if err := s.persistUIDLocked(ss); err != nil {
			if cur.Volume {
				_ = volume.Unmount(filepath.Join(dir, volumeMount))
			}
			return nil, err
		}
	}
	ss.persist.meta.LastUsed = time.Now()
	if err := writePersistMeta(dir, ss.persist.meta); err != nil {
		if cur.Volume {
			_ = volume.Unmount(filepath.Join(dir, volumeMount))
		}
		if ss.uid != 0 {
			delete(s.uids, ss.uid)
		}
		return nil, fullOr(err, "recording the workspace")
	}
	ok = true
	ss.resumed = true
	ss.openAudit(s.cfg.StateDir)
	s.open[ss.ID] = ss
	s.persisted[ss.ID] = dir
	return ss, nil
}

// recoverReplace finishes, in a persistent workspace's directory, what a
// server killed during a restore or a fork left: the workspace keeps its
// files as they were before it (a tree moved aside comes back), and the
// half-made copy goes.
func recoverReplace(dir string) {
	for _, name := range []string{"data", "cache"} {
		moved := filepath.Join(dir, "restore-old", name)
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			if fi, err := os.Lstat(moved); err == nil && fi.IsDir() {
				_ = os.Rename(moved, filepath.Join(dir, name))
			}
		}
	}
	for _, name := range []string{"restore", "restore-old", "image.restore"} {
		_ = nofollow.RemoveAll(filepath.Join(dir, name))
	}
}

// mountPersistent mounts a suspended workspace's filesystem, after what a
// dead server of this machine left of its mount is gone; it refuses one
// that another machine's kernel may still have mounted (two kernels
// writing one ext4 image corrupt it).
func (s *Registry) mountPersistent(dir string, m *persistMeta) error {
	mnt, image := filepath.Join(dir, volumeMount), filepath.Join(dir, "image")
	boot := bootID()
	if m.MountedOn != "" && m.MountedOn != boot {
		return sessErr("session_busy", "workspace %s (%s) was mounted by another machine's server when that server stopped without unmounting it; it resumes on a server of that machine (or after that machine restarts, once an operator has removed mounted_on from its meta.json)", printable.String(m.Name), m.ID)
	}
	if volume.Mounted(mnt) {
		volume.Thaw(mnt) // a server killed in a snapshot's copy left it frozen
		_ = volume.Unmount(mnt)
	}
	// The lazy unmount ends the old filesystem once nothing holds it; a
	// second mount of the image before that would corrupt it.
	// Under the registry's lock: a short wait only (a start-up unmounted
	// a dead server's mounts and waited for them: AwaitLeftMounted); past
	// it the caller retries.
	if len(stillBacked([]string{image}, 200*time.Millisecond)) > 0 {
		if f := s.onHeld; f != nil && s.heldRunning.CompareAndSwap(false, true) {
			go func() {
				defer s.heldRunning.Store(false)
				f()
			}()
		}
		return sessErr("session_busy", "workspace %s (%s) is still held by processes of the server that had it open; retry in a few seconds", printable.String(m.Name), m.ID)
	}
	if err := os.Mkdir(mnt, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return sessErr("internal_error", "mounting the workspace: %s", hostless(err))
	}
	if err := volume.Mount(image, mnt); err != nil {
		return sessErr("internal_error", "mounting the workspace: %s", hostless(err))
	}
	m.MountedOn = boot
	return nil
}

// persistUIDLocked gives a resumed session its recorded uid, or a new one
// (its files then become the new uid's) when that one is in use.
func (s *Registry) persistUIDLocked(ss *Session) error {
	m := &ss.persist.meta
	r := s.cfg.UIDs
	if s.uids == nil {
		s.uids = map[int]bool{}
	}
	if uid := m.UID; uid >= r.First && uid < r.First+r.Count && !s.uids[uid] && !runningUIDs()[uid] {
		s.uids[uid] = true
		ss.uid, ss.owner = uid, &Owner{UID: uid, GID: uid}
		return nil
	}
	uid, err := s.allocUIDLocked()
	if err != nil {
		return err
	}
	ss.uid, ss.owner, m.UID = uid, &Owner{UID: uid, GID: uid}, uid
	chownSession(ss)
	return nil
}

// chownSession gives the session's files to its owner (no sandbox runs in
// it: the walk meets no change).
func chownSession(ss *Session) {
	o := ss.owner
	if o == nil {
		return
	}
	for _, p := range []string{ss.Workspace, ss.Cache} {
		d, err := nofollow.OpenTrusted(p)
		if err != nil {
			continue
		}
		if st, err := d.Stat(); err == nil && int(st.UID) != o.UID {
			budget := MaxFiles
			_ = chownTree(d, o.UID, o.GID, 0, &budget)
			_ = unix.Fchown(d.Fd(), o.UID, o.GID)
		}
		d.Close()
	}
}

// suspend ends an open persistent session's run on this server, keeping
// its files: its interpreters stop, its filesystem is unmounted and its
// lock released. The caller has taken it out of s.open.
func (s *Registry) suspend(ss *Session) {
	s.stopSession(ss)
	p := ss.persist
	m := p.meta
	m.LastUsed = ss.LastUsed()
	if m.Volume {
		mnt := filepath.Join(ss.Dir, volumeMount)
		volume.Trim(mnt) // at rest it holds on the host what its files hold
		_ = volume.Unmount(mnt)
		// Another machine may mount it only once this one's filesystem is
		// gone: recorded as unmounted only then.
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if !loopBacked(filepath.Join(ss.Dir, "image")) {
				m.MountedOn = ""
				break
			}
		}
	}
	_ = writePersistMeta(ss.Dir, m)
	p.lock.Close()
	s.freeUID(ss)
}

// LastUsed is when the session was last used.
func (ss *Session) LastUsed() time.Time {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lastUsed
}

// Persistent reports whether the session outlives its server, and its
// name.
func (ss *Session) Persistent() (name string, ok bool) {
	if ss.persist == nil {
		return "", false
	}
	return ss.persist.meta.Name, true
}

// Resumed reports whether the session was resumed from storage (after a
// restart, a suspension, or on another server): its interpreters start
// afresh.
func (ss *Session) Resumed() bool { return ss.resumed }

// resumeByIDLocked resumes this replica's suspended persistent workspace
// id, if it has one.
func (s *Registry) resumeByIDLocked(id string) (*Session, bool, error) {
	dir := s.persisted[id]
	if dir == "" {
		return nil, false, nil
	}
	m, err := readPersistMeta(dir)
	if err != nil || m.ID != id {
		delete(s.persisted, id) // removed, or another server's handle now
		return nil, false, nil
	}
	if s.draining {
		return nil, true, ErrDraining
	}
	if err := s.capLocked(m.Principal); err != nil {
		return nil, true, err
	}
	ss, err := s.resumeLocked(dir, m, "")
	return ss, true, err
}

// DestroyPersistent removes principal's suspended persistent workspace id
// of this replica (found false when it has none: another principal's is
// not found either).
func (s *Registry) DestroyPersistent(id, principal string) (found bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[id] != nil {
		return false, nil
	}
	dir := s.persisted[id]
	if dir == "" {
		return false, nil
	}
	m, err := readPersistMeta(dir)
	if err != nil || m.ID != id {
		delete(s.persisted, id)
		return false, nil
	}
	if m.Principal != principal {
		return false, nil
	}
	lock, err := lockPersist(dir)
	if errors.Is(err, errHeldElsewhere) {
		return true, heldErr(m)
	}
	if err != nil {
		return true, err
	}
	defer lock.Close()
	delete(s.persisted, id)
	return true, s.removePersistent(dir)
}

// Workspaces lists principal's workspaces: its open sessions here and its
// persistent ones (suspended, or open on another server sharing the
// persistent directory), most recently used first.
func (s *Registry) Workspaces(principal string) []WorkspaceInfo {
	var out []WorkspaceInfo
	seen := map[string]bool{}
	s.mu.Lock()
	var open []*Session
	for _, ss := range s.open {
		if !ss.pooled && ss.Principal == principal {
			open = append(open, ss)
		}
	}
	s.mu.Unlock()
	for _, ss := range open {
		w := WorkspaceInfo{ID: ss.ID, State: "active", Created: ss.Created, LastUsed: ss.LastUsed(), Expires: s.ExpiresAt(ss)}
		if name, ok := ss.Persistent(); ok {
			w.Name, w.Persist = name, true
			seen[ss.Dir] = true
		}
		if used, _, ok := ss.Space(); ok {
			w.Bytes = used
		} else if u, err := ss.Usage(); err == nil {
			w.Bytes = u.Bytes
		}
		out = append(out, w)
	}
	s.scanPersist(func(dir string, m persistMeta) bool {
		if m.Principal != principal || seen[dir] {
			return true
		}
		w := WorkspaceInfo{ID: m.ID, Name: m.Name, Persist: true, State: "suspended", Created: m.Created, LastUsed: m.LastUsed, Expires: m.LastUsed.Add(s.cfg.PersistTTL)}
		if lock, err := lockPersist(dir); err != nil {
			w.State = "elsewhere"
		} else {
			lock.Close()
		}
		w.Bytes, _ = volume.Allocated(filepath.Join(dir, "image"))
		out = append(out, w)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.After(out[j].LastUsed) })
	return out
}

// SweepPersistent removes persistent workspaces suspended longer than
// PersistTTL, and what a server killed while making one left (a directory
// without a record, older than a minute), and returns how many.
func (s *Registry) SweepPersistent(now time.Time) int {
	ents, _ := os.ReadDir(s.persistDir)
	n := 0
	for _, e := range ents {
		dir := filepath.Join(s.persistDir, e.Name())
		if strings.HasPrefix(e.Name(), ".gone-") {
			if removeWorkspace(dir) == nil { // a removal a killed server left
				n++
			}
			continue
		}
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		m, err := readPersistMeta(dir)
		if err == nil && now.Sub(m.LastUsed) <= s.cfg.PersistTTL {
			continue
		}
		if err != nil {
			// Only a directory without a record (a server killed while
			// making it) goes, and only when it is old: a record that
			// cannot be read for another reason is never taken for one.
			if !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if fi, err := os.Lstat(dir); err != nil || now.Sub(fi.ModTime()) < time.Minute {
				continue
			}
		}
		lock, lerr := lockPersist(dir)
		if lerr != nil {
			continue // open on a server (this one, or another)
		}
		if err == nil {
			// Used again since it was read?
			if cur, err := readPersistMeta(dir); err == nil && now.Sub(cur.LastUsed) <= s.cfg.PersistTTL {
				lock.Close()
				continue
			}
		}
		if volume.Mounted(filepath.Join(dir, volumeMount)) {
			volume.Thaw(filepath.Join(dir, volumeMount))
		}
		rerr := s.removePersistent(dir)
		lock.Close()
		if rerr == nil {
			n++
			s.mu.Lock()
			if err == nil && s.persisted[m.ID] == dir {
				delete(s.persisted, m.ID)
			}
			s.mu.Unlock()
		}
	}
	return n
}

// persistentHolds reports whether a record in the persistent directory
// (this server's, or another's sharing it) holds id.
func (s *Registry) persistentHolds(id string) bool {
	if s.persisted[id] != "" {
		return true
	}
	held := false
	s.scanPersist(func(dir string, m persistMeta) bool {
		held = m.ID == id
		return !held
	})
	return held
}

// persistedMeta is the record of this replica's persistent workspace id
// that is not open here.
func (s *Registry) persistedMeta(id string) (persistMeta, error) {
	dir := s.persisted[id]
	if dir == "" {
		return persistMeta{}, fs.ErrNotExist
	}
	m, err := readPersistMeta(dir)
	if err == nil && m.ID != id {
		err = fs.ErrNotExist
	}
	return m, err
}
