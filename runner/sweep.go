package runner

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
)

// A protected name that exists when the sandbox starts, at any depth below
// a writable root, is mounted read-only over itself and the directories
// between it and the root are pinned (mounted over themselves, so they
// cannot be renamed away); the kernel refuses every write, rename and
// removal, so the sweep below never meets a file the user had. A protected
// name that does not exist yet cannot be mounted over without creating a
// placeholder in the user's tree (which srt does, leaving "ghost dotfiles"
// behind). srt-mcp creates nothing; instead, once every process of the
// sandbox is gone, sweep walks every writable root, at any depth, and
// removes each protected name and deny_write match that the run created or
// changed: its inode's change time (ctime, which no unprivileged program
// can set back) is not older than the run's start. Each removal is a
// violation event. Nothing outside the sandbox can act on such a file
// before the sweep except a program the host user runs in that same
// directory during the run.
//
// The sweep runs as the runner, on a tree the sandbox wrote: it never
// follows a link (package nofollow), never reads a file it was not asked
// to judge, and copies nothing of what it reads into events.

// maxSweepDepth bounds how deep the sweep holds directories open. A
// directory at this depth that the run created or changed is removed whole
// (no legitimate tree is that deep; the plan refuses none, but nothing
// that deep can be checked name by name with bounded descriptors).
const maxSweepDepth = 256

// maxGitConfigBytes bounds the .git/config the sweep reads to judge; a
// larger one is removed as unsafe.
const maxGitConfigBytes = 1 << 20

// sweep removes what the run created or changed but was not allowed to,
// and returns one violation per removal. since is when the run started.
func sweep(plan *Plan, since time.Time) []Violation {
	if len(plan.Writable) == 0 {
		return nil
	}
	s := &sweeper{plan: plan, protected: map[string]bool{}, found: map[string]bool{}}
	for _, p := range plan.Protected {
		s.protected[p] = true
	}
	for _, p := range plan.ProtectedFound {
		s.found[p] = true
	}
	for _, w := range plan.Writable {
		d, err := nofollow.OpenDir(w.Src)
		if err != nil {
			continue // gone, or not the directory the plan mounted: nothing of ours to judge
		}
		s.root = w
		s.ownerWritten = slices.Contains(plan.OwnerWritten, w.Src)
		s.since = since.Add(-timestampSlack(d.Fd()))
		s.walk(d, "", 0)
		d.Close()
	}
	return s.out
}

type sweeper struct {
	plan         *Plan
	protected    map[string]bool
	found        map[string]bool // Plan.ProtectedFound
	ownerWritten bool            // the root was written as its owner (Plan.OwnerWritten)
	root         WritableRoot
	since        time.Time
	out          []Violation
}

// changed reports whether the run (or someone during it) created or
// modified the entry.
func (s *sweeper) changed(st nofollow.Stat) bool { return !st.Ctime.Before(s.since) }

func (s *sweeper) report(rel, rule, action string) {
	// The name is the sandbox's: it reaches clients made safe to show.
	s.out = append(s.out, Violation{Kind: "filesystem", Decision: "deny", Path: printable.String(filepath.Join(s.root.Dst, rel)), Rule: rule, Action: action})
}

// walk visits dir (rel below the root, depth levels down).
func (s *sweeper) walk(dir *nofollow.Dir, rel string, depth int) {
	fsys := &policy.Filesystem{AllowGitConfig: s.plan.AllowGitConfig}
	_ = dir.ReadDir(func(e nofollow.Entry) error {
		crel := path.Join(rel, e.Name)
		dst := filepath.Join(s.root.Dst, crel)
		if s.protected[dst] {
			// Read-only for the whole run: unchanged, unless it is a file
			// with another name a run could write it by (a hard link).
			if st, err := dir.Lstat(e.Name); err == nil && st.Mode.IsRegular() && st.Nlink > 1 && s.changed(st) {
				s.judgeProtected(dir, e, crel)
			}
			return nil
		}
		if s.ownerWritten && e.Type != fs.ModeSymlink {
			s.tighten(dir, e.Name)
		}
		isGitFile := e.Name == ".git" && e.Type == 0
		if fsys.IsMandatoryDenied(crel, isGitFile) {
			s.judgeProtected(dir, e, crel)
			return nil
		}
		if g := s.denyGlob(crel); g != "" {
			s.judgeDenied(dir, e, crel, g)
			return nil
		}
		if !e.IsDir() {
			return nil
		}
		if depth+1 >= maxSweepDepth {
			if st, err := dir.Lstat(e.Name); err == nil && s.changed(st) && dir.RemoveAll(e.Name) == nil {
				s.report(crel, "nesting limit", "removed (created by the run more than 256 directories deep, where srt-mcp cannot check it for protected names)")
			}
			return nil
		}
		sub, err := dir.Sub(e.Name)
		if err != nil {
			return nil
		}
		s.walk(sub, crel, depth+1)
		sub.Close()
		return nil
	})
}

// denyGlob returns the deny_write pattern the entry matches, "" if none.
func (s *sweeper) denyGlob(rel string) string {
	abs := filepath.Join(s.root.Src, rel)
	for _, g := range s.plan.DenyWriteGlobs {
		if g == abs {
			return g
		}
		if policy.IsGlob(g) {
			if ok, _ := doublestar.Match(g, abs); ok {
				return g
			}
		}
	}
	return ""
}

// judgeProtected acts on one protected name the run may have created or
// changed. A link or anything but a file or directory is removed, never
// entered or read.
func (s *sweeper) judgeProtected(dir *nofollow.Dir, e nofollow.Entry, rel string) {
	st, err := dir.Lstat(e.Name)
	if err != nil {
		return
	}
	base, parent := path.Base(rel), path.Base(path.Dir(rel))
	rule := "mandatory write-deny: " + base
	if parent == ".git" || strings.HasPrefix(base, ".claude") || parent == ".claude" {
		rule = "mandatory write-deny: " + path.Join(parent, base)
	}
	// A protected name that was not there when the run was planned is the
	// run's, however old its change time: renaming a directory into
	// place changes the directory's ctime, not its files'.
	isNew := !s.found[filepath.Join(s.root.Dst, rel)]
	switch {
	case st.Mode.IsDir():
		sub, err := dir.Sub(e.Name)
		if err != nil {
			return
		}
		hooks := parent == ".git" && base == "hooks"
		removed := s.prune(sub, hooks, isNew, 1)
		empty := isEmpty(sub)
		sub.Close()
		if st2, err := dir.Lstat(e.Name); err == nil && empty && (isNew || s.changed(st2)) && !hooks {
			if dir.Remove(e.Name) == nil {
				removed = append(removed, ".")
			}
		}
		if len(removed) > 0 {
			what := "removed what the run created or changed there (the name is write-protected)"
			if hooks {
				what = "removed hooks the run created or changed: " + listNames(removed)
			}
			s.report(rel, rule, what)
		}
	case !isNew && !s.changed(st):
		return
	case st.Mode.IsRegular() && parent == ".git" && base == "config":
		b, err := dir.ReadFile(e.Name, maxGitConfigBytes)
		if err == nil && safeGitConfig(b) && (st.Nlink == 1 || s.protected[filepath.Join(s.root.Dst, rel)]) {
			// Kept: git init writes one. A new one with another name (a
			// hard link the run made) would be writable by that name in
			// the next run, where this one is read-only.
			return
		}
		if dir.Remove(e.Name) == nil {
			s.report(rel, rule+" (it sets keys that make git run programs)", "removed (created or changed by the run; the name is write-protected)")
		}
	default:
		if dir.Remove(e.Name) == nil {
			what := "removed (created or changed by the run; the name is write-protected)"
			if st.Mode&fs.ModeSymlink != 0 {
				what = "removed (a symbolic link the run made under a write-protected name)"
			}
			s.report(rel, rule, what)
		}
	}
}

// judgeDenied removes a deny_write match the run created or changed.
func (s *sweeper) judgeDenied(dir *nofollow.Dir, e nofollow.Entry, rel, glob string) {
	st, err := dir.Lstat(e.Name)
	if err != nil {
		return
	}
	rule := "deny_write: " + glob
	if st.Mode.IsDir() {
		sub, err := dir.Sub(e.Name)
		if err != nil {
			return
		}
		removed := s.prune(sub, false, false, 1)
		empty := isEmpty(sub)
		sub.Close()
		if st2, err := dir.Lstat(e.Name); err == nil && empty && s.changed(st2) && dir.Remove(e.Name) == nil {
			removed = append(removed, ".")
		}
		if len(removed) > 0 {
			s.report(rel, rule, "removed what the run created or changed there (the path is write-denied)")
		}
		return
	}
	if s.changed(st) && dir.Remove(e.Name) == nil {
		s.report(rel, rule, "removed (created or changed by the run; the path is write-denied)")
	}
}

// prune removes, inside a protected directory, every entry the run
// created or changed (new hook samples excepted in .git/hooks: git never
// runs them), and returns their names.
func (s *sweeper) prune(dir *nofollow.Dir, hooks, all bool, depth int) []string {
	changed := func(st nofollow.Stat) bool { return all || s.changed(st) }
	var removed []string
	_ = dir.ReadDir(func(e nofollow.Entry) error {
		st, err := dir.Lstat(e.Name)
		if err != nil {
			return nil
		}
		if st.Mode.IsDir() {
			if depth+1 >= maxSweepDepth {
				if changed(st) && dir.RemoveAll(e.Name) == nil {
					removed = append(removed, e.Name)
				}
				return nil
			}
			sub, err := dir.Sub(e.Name)
			if err != nil {
				return nil
			}
			inner := s.prune(sub, false, all, depth+1)
			empty := isEmpty(sub)
			sub.Close()
			if hooks && (len(inner) > 0 || changed(st)) {
				// git runs nothing from a directory in hooks, but a
				// hook script could: it goes whole.
				if dir.RemoveAll(e.Name) == nil {
					removed = append(removed, e.Name)
				}
				return nil
			}
			if len(inner) > 0 || (empty && changed(st)) {
				if empty && dir.Remove(e.Name) == nil {
					removed = append(removed, e.Name)
				} else if len(inner) > 0 {
					removed = append(removed, e.Name)
				}
			}
			return nil
		}
		if !changed(st) {
			return nil
		}
		if hooks && st.Mode.IsRegular() && strings.HasSuffix(e.Name, ".sample") {
			return nil
		}
		if dir.Remove(e.Name) == nil {
			removed = append(removed, e.Name)
		}
		return nil
	})
	return removed
}

func isEmpty(d *nofollow.Dir) bool {
	empty := true
	_ = d.ReadDir(func(nofollow.Entry) error {
		empty = false
		return fs.SkipAll
	})
	return empty
}

func listNames(names []string) string {
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}

// safeGitKeys are the config keys git init, git clone and git config
// user.* write; none of them makes git run a program.
var safeGitKeys = []string{
	"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
	"core.ignorecase", "core.precomposeunicode", "core.symlinks", "core.autocrlf", "core.eol",
	"core.quotepath", "remote.*.url", "remote.*.fetch", "remote.*.pushurl", "remote.*.mirror",
	"branch.*.remote", "branch.*.merge", "branch.*.rebase", "user.name", "user.email",
	"init.defaultbranch", "extensions.objectformat", "extensions.worktreeconfig", "pull.rebase",
	"gc.auto", "advice.*",
}

// safeGitConfig reports whether a git config holds only safeGitKeys.
func safeGitConfig(b []byte) bool { return unsafeGitConfigKey(b) == "" }

// unsafeGitConfigKey returns the first key outside safeGitKeys ("?" for a
// line it cannot parse), "" if none. The result is for tests: the sweep
// never puts it in an event, since it is text the sandbox wrote.
func unsafeGitConfigKey(b []byte) string {
	// Strict where git is lenient: a line git could read otherwise than
	// this loop does (a header followed by more on its line, a value
	// continued on the next line with a backslash, a key or section name
	// git would not write) is unsafe, so that what is kept is what git
	// init, clone and config write, read the way git reads it.
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), maxGitConfigBytes)
	for sc.Scan() {
		raw := strings.TrimRight(sc.Text(), " \t\r")
		if strings.HasSuffix(raw, "\\") {
			return "?"
		}
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return "?"
			}
			if rest := strings.TrimSpace(line[end+1:]); rest != "" && rest[0] != '#' && rest[0] != ';' {
				return "?"
			}
			name, sub, hasSub := strings.Cut(strings.TrimSpace(line[1:end]), " ")
			if !gitName.MatchString(name) || hasSub && !gitSubsection.MatchString(strings.TrimSpace(sub)) {
				return "?"
			}
			section = strings.ToLower(name)
			if hasSub {
				section += ".*"
			}
			continue
		}
		key, _, _ := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !gitKey.MatchString(key) {
			return "?"
		}
		full := section + "." + strings.ToLower(key)
		ok := false
		for _, k := range safeGitKeys {
			if k == full || (strings.HasSuffix(k, ".*") && strings.HasPrefix(full, strings.TrimSuffix(k, "*"))) {
				ok = true
				break
			}
		}
		if !ok {
			return full
		}
	}
	if sc.Err() != nil {
		return "?"
	}
	return ""
}

// What git itself writes in a config: section names, quoted subsections
// without quotes or backslashes inside, and key names.
var (
	gitName       = regexp.MustCompile(`^[A-Za-z0-9.-]+$`)
	gitSubsection = regexp.MustCompile(`^"[^"\\]*"$`)
	gitKey        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)
)
