package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The sandbox's /etc is one read-only bind of a mirror of the allow-listed
// entries of the host's /etc (policy.SystemEtc). One bind instead of one per
// entry matters: bwrap re-reads the mount table for every bind, so start-up
// time grows with the square of the number of mounts.
//
// The mirror holds only what every local user may read anyway: files and
// directories that are world-readable (so /etc/ssl/private, shadow files and
// root-only configs never appear even when their parent is listed), and
// symlinks as symlinks. It is rebuilt when any mirrored directory or
// top-level entry changes (package updates replace files by rename, which
// changes the directory). It lives in the runner's private cache directory
// (CacheRoot), never in a place another local user can write: whoever
// could write it would choose the /etc (and sitecustomize.py) of every
// sandbox.

var etcViewMu sync.Mutex

// CacheRoot returns the runner's private cache directory, creating it 0700:
// dir when the caller named one, else $XDG_RUNTIME_DIR/srt-mcp,
// $XDG_CACHE_HOME/srt-mcp or ~/.cache/srt-mcp, or /run/srt-mcp as root. It
// refuses (and returns "") a directory that is not owned by the runner's
// user, that others may write, or that has an ancestor another user could
// change (see checkPrivateDir). The path returned is canonical.
func CacheRoot(dir string) (string, error) {
	candidates := cacheCandidates(dir)
	return cacheRootOf(candidates)
}

// cacheCandidates are the directories CacheRoot may use, in order.
func cacheCandidates(dir string) []string {
	var candidates []string
	switch {
	case dir != "":
		candidates = []string{dir}
	case os.Geteuid() == 0:
		candidates = []string{"/run/srt-mcp"}
	default:
		if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
			candidates = append(candidates, filepath.Join(x, "srt-mcp"))
		}
		if c, err := os.UserCacheDir(); err == nil && filepath.IsAbs(c) {
			candidates = append(candidates, filepath.Join(c, "srt-mcp"))
		}
	}
	return candidates
}

// PrivateDirs are every directory srt-mcp may keep private things in for
// this user (the interception CA's key among them): each cache candidate
// and each default state directory, whichever a run or a server used.
// No sandbox sees them, even under a directory its policy exposes.
func PrivateDirs() []string {
	out := append(cacheCandidates(""), "/run/srt-mcp", "/var/lib/srt-mcp")
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		out = append(out, filepath.Join(x, "srt-mcp"))
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		out = append(out, filepath.Join(home, ".local", "state", "srt-mcp"), filepath.Join(home, ".cache", "srt-mcp"))
	}
	return out
}

func cacheRootOf(candidates []string) (string, error) {
	var lastErr error = errors.New("no private cache directory (set XDG_RUNTIME_DIR or HOME)")
	for _, c := range candidates {
		if err := os.MkdirAll(filepath.Dir(c), 0o700); err != nil {
			lastErr = err
			continue
		}
		// 0711 as root: the sandbox user's bwrap must be able to reach
		// the mirror (it resolves mount sources by path), not list or
		// change anything here.
		mode := os.FileMode(0o700)
		if os.Geteuid() == 0 {
			mode = 0o711
		}
		if err := os.Mkdir(c, mode); err != nil && !os.IsExist(err) {
			lastErr = err
			continue
		}
		canon, err := filepath.EvalSymlinks(c)
		if err != nil {
			lastErr = err
			continue
		}
		if err := checkPrivateDir(canon); err != nil {
			lastErr = err
			continue
		}
		return canon, nil
	}
	return "", lastErr
}

// checkPrivateDir checks that dir (canonical) is a directory owned by us,
// that nobody else may write, and that every directory above it belongs to
// us or root and is not writable by others unless sticky (as /tmp is: then
// others cannot rename or remove what is ours in it).
func checkPrivateDir(dir string) error {
	me := os.Geteuid()
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	owner, ok := ownerOf(fi)
	if !fi.IsDir() || !ok || owner != me || fi.Mode().Perm()&0o066 != 0 {
		return fmt.Errorf("%s is not a private directory (mode 0700 or 0711, owned by uid %d); remove it or fix its owner and mode", dir, me)
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		owner, ok := ownerOf(fi)
		if !fi.IsDir() || !ok || (owner != 0 && owner != me) {
			return fmt.Errorf("%s, above srt-mcp's cache %s, belongs to uid %d: another user could replace the cache", p, dir, owner)
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s, above srt-mcp's cache %s, is writable by others and not sticky: another user could replace the cache", p, dir)
		}
		if p == "/" {
			return nil
		}
	}
}

// EtcView returns an up-to-date mirror of the given /etc entries (relative
// names) under root (a CacheRoot), building it if needed. src is the host's
// /etc. The common case, an unchanged /etc, costs one small file read and a
// stat of each mirrored directory and top-level entry. root is
// owner-checked before anything in it is read.
func EtcView(root, src string, entries []string) (string, error) {
	etcViewMu.Lock()
	defer etcViewMu.Unlock()
	if err := checkPrivateDir(root); err != nil {
		return "", err
	}
	manifest := filepath.Join(root, "etc-current.json")
	var cur etcManifest
	if b, err := os.ReadFile(manifest); err == nil && json.Unmarshal(b, &cur) == nil && filepath.Dir(cur.Dir) == root && cur.valid(src, entries) {
		return cur.Dir, nil
	}
	m := newEtcManifest(src, entries)
	dir := filepath.Join(root, "etc-"+m.stamp())
	if _, err := os.Stat(filepath.Join(dir, ".srt-mcp-complete")); err != nil {
		tmp, err := os.MkdirTemp(root, "build-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		for _, e := range entries {
			if err := mirror(filepath.Join(src, e), filepath.Join(tmp, e)); err != nil {
				return "", fmt.Errorf("mirror /etc/%s: %w", e, err)
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, ".srt-mcp-complete"), nil, 0o444); err != nil {
			return "", err
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, serr := os.Stat(filepath.Join(dir, ".srt-mcp-complete")); serr != nil {
				return "", err
			}
		}
	}
	m.Dir = dir
	if b, err := json.Marshal(m); err == nil {
		_ = writeFileAtomic(manifest, b, 0o600)
	}
	// Drop mirrors of older /etc states.
	old, _ := filepath.Glob(filepath.Join(root, "etc-*"))
	for _, o := range old {
		if o != dir && o != manifest {
			os.RemoveAll(o)
		}
	}
	return dir, nil
}

// etcManifest records what a mirror was built from: the mirrored entries
// and the state (mode, size, mtime) of each top-level entry and directory.
type etcManifest struct {
	Dir     string      `json:"dir"`
	Entries []string    `json:"entries"`
	States  []pathState `json:"states"`
}

type pathState struct {
	Path  string `json:"p"`
	Mode  uint32 `json:"m"`
	Size  int64  `json:"s"`
	MTime int64  `json:"t"`
}

func statePath(p string) pathState {
	fi, err := os.Lstat(p)
	if err != nil {
		return pathState{Path: p}
	}
	return pathState{Path: p, Mode: uint32(fi.Mode()), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
}

func newEtcManifest(src string, entries []string) etcManifest {
	m := etcManifest{Entries: append([]string(nil), entries...)}
	for _, e := range entries {
		p := filepath.Join(src, e)
		m.States = append(m.States, statePath(p))
		if t, err := filepath.EvalSymlinks(p); err == nil && t != p {
			m.States = append(m.States, statePath(t))
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() && q != p {
					m.States = append(m.States, statePath(q))
				}
				return nil
			})
		}
	}
	return m
}

func (m *etcManifest) stamp() string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(m.Entries)
	_ = json.NewEncoder(h).Encode(m.States)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// valid reports whether nothing the mirror depends on has changed.
func (m *etcManifest) valid(src string, entries []string) bool {
	if m.Dir == "" || strings.Join(m.Entries, "\x00") != strings.Join(entries, "\x00") {
		return false
	}
	if _, err := os.Stat(filepath.Join(m.Dir, ".srt-mcp-complete")); err != nil {
		return false
	}
	for _, st := range m.States {
		if statePath(st.Path) != st {
			return false
		}
	}
	return true
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so readers see the old or the new content, never a part.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// mirror copies src to dst: world-readable regular files and directories,
// symlinks as symlinks; anything else is left out. A top-level symlink
// (such as /etc/localtime) is copied as the file it points to.
func mirror(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return nil // absent on this host
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if !fi.IsDir() {
		return copyWorldReadable(src, dst, fi)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		info, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err == nil {
				_ = os.Symlink(t, out)
			}
		case info.IsDir():
			if info.Mode().Perm()&0o005 != 0o005 {
				return fs.SkipDir
			}
			return os.MkdirAll(out, 0o755)
		case info.Mode().IsRegular():
			return copyWorldReadable(p, out, info)
		}
		return nil
	})
}

func copyWorldReadable(src, dst string, fi fs.FileInfo) error {
	if fi.Mode().Perm()&0o004 == 0 || !fi.Mode().IsRegular() {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return nil
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm()&0o755|0o444)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
