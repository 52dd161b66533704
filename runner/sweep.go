package runner

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/srt-mcp/srt-mcp/policy"
)

// A protected name that exists when the sandbox starts is mounted read-only
// over itself, so the kernel refuses every write, rename and removal. A
// protected name that does not exist yet cannot be mounted over without
// creating a placeholder in the user's tree (which srt does, leaving "ghost
// dotfiles" behind). srt-mcp creates nothing; instead, once every process of
// the sandbox is gone, sweep looks for protected names and deny_write matches
// that the run created inside its writable paths, removes them, and reports
// each as a violation event. Nothing outside the sandbox can act on such a
// file before the sweep except a program the host user runs in that same
// directory during the run.

// sweep removes what the run created but was not allowed to, and returns
// one violation per removal.
func sweep(plan *Plan) []Violation {
	if len(plan.Writable) == 0 {
		return nil
	}
	protected := map[string]bool{}
	for _, p := range plan.Protected {
		protected[p] = true
	}
	var out []Violation
	fsys := policy.Filesystem{}
	r := &resolver{in: PlanInput{FS: fsys}}
	for _, w := range plan.Writable {
		fi, err := os.Stat(w.Src)
		if err != nil || !fi.IsDir() {
			continue
		}
		found, err := r.findProtected(w.Src)
		if err != nil {
			continue
		}
		for _, rel := range found {
			dst := filepath.Join(w.Dst, rel)
			if protected[dst] || underAny(dst, protected) {
				continue
			}
			src := filepath.Join(w.Src, rel)
			if v, ok := removeCreated(src, dst, rel); ok {
				out = append(out, v)
			}
		}
	}
	for _, g := range plan.DenyWriteGlobs {
		matches, _ := doublestar.FilepathGlob(g, doublestar.WithNoFollow())
		if !policy.IsGlob(g) {
			if _, err := os.Lstat(g); err == nil {
				matches = []string{g}
			}
		}
		for _, m := range matches {
			root, ok := writableRootOf(plan, m)
			if !ok || protected[m] || underAny(m, protected) {
				continue
			}
			if err := os.RemoveAll(m); err == nil {
				_ = root
				out = append(out, Violation{Kind: "filesystem", Decision: "deny", Path: m,
					Rule: "deny_write: " + g, Action: "removed (created by the run; the path is write-denied)"})
			}
		}
	}
	return out
}

// removeCreated removes one protected name the run created. A new .git
// directory (git init or clone inside the sandbox) keeps its hook samples
// and a config that only holds keys that run no programs.
func removeCreated(src, dst, rel string) (Violation, bool) {
	v := Violation{Kind: "filesystem", Decision: "deny", Path: dst, Rule: "mandatory write-deny: " + filepath.Base(rel)}
	base := filepath.Base(rel)
	parent := filepath.Base(filepath.Dir(rel))
	switch {
	case parent == ".git" && base == "hooks":
		ents, err := os.ReadDir(src)
		if err != nil {
			return v, false
		}
		var removed []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".sample") && e.Type().IsRegular() {
				continue
			}
			if os.RemoveAll(filepath.Join(src, e.Name())) == nil {
				removed = append(removed, e.Name())
			}
		}
		if len(removed) == 0 {
			return v, false
		}
		v.Rule = "mandatory write-deny: .git/hooks"
		v.Action = "removed hooks created by the run: " + strings.Join(removed, ", ")
		return v, true
	case parent == ".git" && base == "config":
		if key := unsafeGitConfigKey(src); key == "" {
			return v, false
		} else {
			v.Rule = "mandatory write-deny: .git/config (" + key + " runs a program)"
		}
	}
	if err := os.RemoveAll(src); err != nil {
		return v, false
	}
	v.Action = "removed (created by the run; the name is write-protected)"
	return v, true
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

// unsafeGitConfigKey returns the first key outside safeGitKeys, "" if none.
func unsafeGitConfigKey(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return line
			}
			hdr := strings.TrimSpace(line[1:end])
			name, sub, hasSub := strings.Cut(hdr, " ")
			section = strings.ToLower(name)
			if hasSub {
				section += ".*"
				_ = sub
			}
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		key, _, _ := strings.Cut(line, "=")
		full := section + "." + strings.ToLower(strings.TrimSpace(key))
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
	return ""
}

func underAny(p string, set map[string]bool) bool {
	for q := range set {
		if policy.Within(p, q) {
			return true
		}
	}
	return false
}

func writableRootOf(plan *Plan, p string) (WritableRoot, bool) {
	for _, w := range plan.Writable {
		if policy.Within(p, w.Src) {
			return w, true
		}
	}
	return WritableRoot{}, false
}
