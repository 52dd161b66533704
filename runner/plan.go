package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/policy"
)

// MountKind says what one mount of the plan does.
type MountKind string

// Mount kinds. Every kind maps to one bwrap option and one seatbelt rule.
const (
	MountRO        MountKind = "ro-bind"    // host Src read-only at Dst
	MountRW        MountKind = "bind"       // host Src writable at Dst
	MountTmpfs     MountKind = "tmpfs"      // an empty private directory (Size bytes at most)
	MountHideFile  MountKind = "hide-file"  // an unreadable, unwritable file
	MountSymlink   MountKind = "symlink"    // a symlink at Dst pointing to Src
	MountDir       MountKind = "dir"        // an empty directory inside an earlier tmpfs
	MountProc      MountKind = "proc"       // a procfs of the sandbox's own pid namespace
	MountDev       MountKind = "dev"        // a minimal /dev
	MountRemountRO MountKind = "remount-ro" // make the mount at Dst read-only (last)
)

// Mount is one step of the sandbox's filesystem view.
type Mount struct {
	Kind MountKind `json:"kind"`
	Src  string    `json:"src,omitempty"`
	Dst  string    `json:"dst"`
	Size int64     `json:"size,omitempty"`
	// System marks a source only the host's administrator can change (the
	// system view, /etc, /proc): it is opened following links. Every other
	// source is opened without following any link and mounted by
	// descriptor.
	System bool `json:"system,omitempty"`
}

// Fixed paths inside every sandbox.
const (
	SandboxTmp  = "/tmp"
	SandboxHome = "/tmp/home"
	SandboxShm  = "/dev/shm"
)

// The parts of /proc Docker keeps from containers: read-only (procReadOnly)
// or masked (files by /dev/null, directories by an empty read-only tmpfs).
// Whichever exist on the host are treated so in every sandbox.
var (
	procReadOnly    = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}
	procMaskedFiles = []string{"kcore", "keys", "timer_list", "timer_stats", "sched_debug", "latency_stats"}
	procMaskedDirs  = []string{"acpi", "asound", "scsi"}
)

// DefaultTmpBytes is the size of the private /tmp when the policy sets none.
const DefaultTmpBytes = 512 << 20

// Plan is a policy resolved against the host's filesystem: the ordered
// mounts that build the sandbox's view, plus what the post-run sweep needs.
type Plan struct {
	Mounts []Mount `json:"mounts"`
	// Cwd is the canonical working directory.
	Cwd string `json:"cwd"`
	// Writable are the writable roots (sandbox path = host path unless an
	// extra mount maps it), scanned after the run for protected names the
	// run created.
	Writable []WritableRoot `json:"writable,omitempty"`
	// Protected are the sandbox paths that were protected at start.
	Protected []string `json:"protected,omitempty"`
	// ProtectedFound are the protected names that existed in writable
	// roots at start (sandbox paths, links included): any other the sweep
	// finds is the run's, whatever its change time says (a directory
	// renamed into place keeps its files' times).
	ProtectedFound []string `json:"protected_found,omitempty"`
	// OwnerWritten are the writable roots (host paths) the run wrote as
	// their owner through idmapped mounts: the sweep takes group and other
	// write off what the run made there.
	OwnerWritten []string `json:"owner_written,omitempty"`
	// DenyWriteGlobs are absolute deny_write patterns; files the run creates
	// that match them are removed by the sweep.
	DenyWriteGlobs []string `json:"deny_write_globs,omitempty"`
	// AllowGitConfig: .git/config is not a protected name.
	AllowGitConfig bool `json:"allow_git_config,omitempty"`
	// PrivateCwd: Cwd is a directory of the sandbox's own /tmp.
	PrivateCwd bool `json:"private_cwd,omitempty"`
}

// WritableRoot is one writable directory of the sandbox.
type WritableRoot struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

// PlanInput is what BuildPlan resolves.
type PlanInput struct {
	FS       policy.Filesystem
	Cwd      string // absolute
	Home     string // absolute; for "~"
	Extra    []ExtraMount
	TmpBytes int64
	// Root is prepended to every host path that is read (tests use a fake
	// host tree); "" means the real root.
	Root string
	// SystemView and SystemEtc default to the policy package's lists.
	SystemView []string
	SystemEtc  []string
	// Ceiling, when set, bounds allow_read and allow_write after symlinks
	// are resolved.
	Ceiling *Ceiling
	// PrivateCwd makes a Cwd under /tmp a directory of the sandbox's own
	// /tmp, created empty, even if the host has that path.
	PrivateCwd bool
	// Hide are host paths hidden whatever the rules say.
	Hide []string
	// EtcDir, when set, is a mirror of the SystemEtc entries (see EtcView)
	// bound at /etc in one mount instead of one mount per entry. It is not
	// used when an allow entry lands inside /etc.
	EtcDir string
	// ProcDir is the host procfs consulted for which of Docker's masked
	// /proc paths exist ("" = /proc; tests use a fake one).
	ProcDir string
	// Reserved are host paths no entry may name (srt-mcp's own caches).
	Reserved []string
	// Overlay are files of the runner's own (the trust bundle, masked
	// credentials' stand-ins) bound read-only over the view at Dst, after
	// everything the rules mount there.
	Overlay []ExtraMount
	// LinkOwners are uids besides root whose symlinks are followed in
	// paths that grant access (tests use it for a fake host's links).
	LinkOwners []int
}

type ruleKind int

const (
	kSystem ruleKind = iota
	kAllowRead
	kAllowWrite
	kDenyRead
	kDenyWrite
	kMandatory
	kPin
	kExtraRO
	kExtraRW
	kFixed // a mount of the sandbox's own (/proc, /dev, /tmp): nothing of the host
)

type rule struct {
	kind  ruleKind
	src   string // host path
	dst   string // sandbox path
	isDir bool
	field string // for errors
}

type state int

const (
	stInvisible state = iota
	stHidden
	stRO
	stRW
	stPrivate // the sandbox's own tmpfs or procfs: no host path shows there
)

// maxScan bounds how many directory entries the protected-name search reads
// per plan; a larger tree is an error rather than a partial search.
const maxScan = 200000

// BuildPlan resolves the policy against the host filesystem. It follows
// symlinks so that every rule applies where a path really is, expands globs,
// refuses allow entries that do not exist, and finds the protected names
// (policy.MandatoryDenyPaths) that already exist inside writable paths.
func BuildPlan(in PlanInput) (*Plan, error) {
	if in.SystemView == nil {
		in.SystemView = policy.SystemView
	}
	if in.SystemEtc == nil {
		in.SystemEtc = policy.SystemEtc
	}
	if !filepath.IsAbs(in.Cwd) {
		return nil, errorf(ErrCodeInvalidCwd, "working directory %q is not absolute", in.Cwd)
	}
	in.Cwd = filepath.Clean(in.Cwd) // clean first, then check: /tmp/../etc is /etc
	if in.Home == "" {
		in.Home = "/"
	}
	r := &resolver{in: in}
	for _, m := range in.Extra {
		if policy.Within(filepath.Clean(in.Cwd), filepath.Clean(m.Dst)) {
			// A directory of an extra mount (a session's /mnt/data): a
			// sandbox path, checked when the sandbox enters it.
			plan := &Plan{Cwd: filepath.Clean(in.Cwd)}
			return r.finish(plan, plan.Cwd)
		}
	}
	if r.privateCwd(filepath.Clean(in.Cwd)) {
		// A directory of the sandbox's own /tmp: nothing of the host.
		plan := &Plan{Cwd: filepath.Clean(in.Cwd), PrivateCwd: true}
		return r.finish(plan, plan.Cwd)
	}
	cwd, err := r.canonicalGrant(in.Cwd)
	if err != nil {
		return nil, errorf(ErrCodeInvalidCwd, "working directory %q: %v", in.Cwd, plainErr(err))
	}
	if fi, err := os.Stat(r.host(cwd)); err != nil || !fi.IsDir() {
		return nil, errorf(ErrCodeInvalidCwd, "working directory %q is not a directory", in.Cwd)
	}
	return r.finish(&Plan{Cwd: cwd}, cwd)
}

func (r *resolver) finish(plan *Plan, cwd string) (*Plan, error) {
	in := r.in
	rules, err := r.userRules(cwd, plan)
	if err != nil {
		return nil, err
	}
	if r.in.EtcDir != "" {
		var kept []rule
		for _, ru := range rules {
			if !policy.Within(ru.dst, "/etc") {
				kept = append(kept, ru)
				continue
			}
			if ru.kind == kAllowRead || ru.kind == kAllowWrite || ru.kind == kExtraRO || ru.kind == kExtraRW {
				r.in.EtcDir = "" // the view cannot take new entries: bind /etc entry by entry
				kept = rules
				break
			}
			// A deny inside the view applies only to what the view has.
			if _, err := os.Lstat(filepath.Join(r.in.EtcDir, strings.TrimPrefix(ru.dst, "/etc"))); err == nil {
				kept = append(kept, ru)
			}
		}
		rules = kept
	}
	rules = append(r.systemRules(), rules...)
	for _, d := range []string{"/proc", "/dev", SandboxShm, SandboxTmp} {
		rules = append(rules, rule{kind: kFixed, src: d, dst: d, isDir: true})
	}

	// First pass: which roots are writable. Then look for protected names
	// inside them and add those (and the pins that stop renames) as rules.
	_, states := evaluate(rules)
	prot, err := r.protectedRules(rules, states)
	if err != nil {
		return nil, err
	}
	rules = append(rules, prot...)
	mounts, states := evaluate(rules)

	for _, ru := range rules {
		if (ru.kind == kMandatory || ru.kind == kDenyWrite) && states[ru.dst] == stRO {
			plan.Protected = append(plan.Protected, ru.dst)
		}
	}
	plan.Protected = dedupe(plan.Protected)
	plan.ProtectedFound = dedupe(r.found)
	for _, ru := range rules {
		if states[ru.dst] == stRW && (ru.kind == kAllowWrite || ru.kind == kExtraRW) {
			plan.Writable = append(plan.Writable, WritableRoot{Src: ru.src, Dst: ru.dst})
		}
	}

	tmp := in.TmpBytes
	if tmp == 0 {
		tmp = DefaultTmpBytes
	}
	fixed := []Mount{
		{Kind: MountProc, Dst: "/proc"},
		{Kind: MountDev, Dst: "/dev"},
		{Kind: MountTmpfs, Dst: SandboxShm, Size: tmp},
		{Kind: MountTmpfs, Dst: SandboxTmp, Size: tmp},
		{Kind: MountDir, Dst: SandboxHome},
	}
	fixed = append(fixed, procMounts(in.ProcDir)...)
	for _, o := range in.Overlay {
		fixed = append(fixed, Mount{Kind: MountRO, Src: o.Src, Dst: filepath.Clean(o.Dst)})
	}
	if r.privateCwd(plan.Cwd) && plan.Cwd != SandboxTmp {
		fixed = append(fixed, Mount{Kind: MountDir, Dst: plan.Cwd})
	}
	plan.Mounts = mergeByDepth(mounts, fixed)
	for _, m := range plan.Mounts {
		if m.Kind == MountTmpfs && m.Dst != SandboxTmp && m.Dst != SandboxShm {
			plan.Mounts = append(plan.Mounts, Mount{Kind: MountRemountRO, Dst: m.Dst})
		}
	}
	plan.Mounts = append(plan.Mounts,
		Mount{Kind: MountRemountRO, Dst: "/dev"},
		Mount{Kind: MountRemountRO, Dst: "/"},
	)
	return plan, nil
}

type resolver struct {
	in      PlanInput
	scanned int
	hidden  []string // canonical paths no rule may expose
	found   []string // protected names found in writable roots (sandbox paths)
}

// hiddenBy returns the hidden path p lies in, or "".
func (r *resolver) hiddenBy(p string) string {
	for _, h := range r.hidden {
		if policy.Within(p, h) {
			return h
		}
	}
	return ""
}

func (r *resolver) host(p string) string {
	if r.in.Root == "" {
		return p
	}
	return filepath.Join(r.in.Root, p)
}

// canonical resolves symlinks in an existing absolute path, relative to Root.
func (r *resolver) canonical(p string) (string, error) { return r.resolve(p, false) }

// canonicalGrant resolves a path that grants access (allow_read,
// allow_write, the working directory): a symlink on the way is followed
// only if root owns it (or a uid in PlanInput.LinkOwners). A sandbox never
// runs as root, so it cannot have made such a link; a link it could have
// planted (where a later run's allow_write points, say) is refused
// instead of followed.
func (r *resolver) canonicalGrant(p string) (string, error) { return r.resolve(p, true) }

// ErrUntrustedLink is returned (wrapped) for a link canonicalGrant refuses.
var ErrUntrustedLink = errors.New("untrusted symbolic link")

func (r *resolver) resolve(p string, grant bool) (string, error) {
	// One component at a time, so absolute link targets stay inside Root
	// and each link's owner can be checked.
	cur := "/"
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	for hops := 0; len(parts) > 0; {
		name := parts[0]
		parts = parts[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(r.host(next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if grant && !r.trustedLink(fi) {
			owner, _ := ownerOf(fi)
			t, _ := os.Readlink(r.host(next))
			return "", fmt.Errorf("%w: %s is a symbolic link (to %s) owned by uid %d; srt-mcp follows only links owned by root where it grants access, since a sandbox could have made this one: name the real path", ErrUntrustedLink, next, t, owner)
		}
		if grant {
			if d := r.sandboxWrittenAbove(cur); d != "" {
				t, _ := os.Readlink(r.host(next))
				return "", fmt.Errorf("%w: %s is a symbolic link (to %s) in %s, where sandboxes have written as the directory's owner (an idmapped mount): any of them could have made it, root's or not; name the real path", ErrUntrustedLink, next, t, d)
			}
			if d := r.writableByOthersAbove(cur); d != "" {
				t, _ := os.Readlink(r.host(next))
				return "", fmt.Errorf("%w: %s is a symbolic link (to %s) below %s, which others than root may write: a link a sandbox made as root in a mapped directory could have been moved there; name the real path", ErrUntrustedLink, next, t, d)
			}
		}
		if hops++; hops > 40 {
			return "", errors.New("too many levels of symbolic links")
		}
		t, err := os.Readlink(r.host(next))
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(t) {
			cur = "/"
		}
		parts = append(strings.Split(strings.TrimPrefix(t, "/"), "/"), parts...)
	}
	return cur, nil
}

// trustedLink reports whether a link's owner is root (or one of
// PlanInput.LinkOwners).
func (r *resolver) trustedLink(fi fs.FileInfo) bool {
	owner, ok := ownerOf(fi)
	return ok && r.trustedOwner(owner)
}

// trustedOwner reports whether uid is root or one of PlanInput.LinkOwners.
func (r *resolver) trustedOwner(owner int) bool {
	if owner == 0 {
		return true
	}
	for _, u := range r.in.LinkOwners {
		if u == owner {
			return true
		}
	}
	return false
}

// sandboxWrittenAbove returns the directory, dir or one above it, that a
// root runner marked when it mounted it for sandboxes through an idmapped
// mount (idmap_linux.go), "" if none. There a sandbox wrote as the
// directory's owner, root included, so a link's owner says nothing about
// who made it.
func (r *resolver) sandboxWrittenAbove(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if sandboxWritten(r.host(d)) {
			return d
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

// writableByOthersAbove returns the directory, dir or one above it, that
// a user other than root (and PlanInput.LinkOwners) owns or that its group
// or others may write, "" if none. A root-owned link is proof that no
// sandbox made it only where nothing but root could have put it: a
// sandbox writing a root-owned tree through an idmapped mount makes
// root-owned links, and where it may also write without a mapping
// (another directory of the same mount) it can move one out of the marked
// tree.
func (r *resolver) writableByOthersAbove(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(r.host(d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
			return d
		}
		if owner, ok := ownerOf(fi); !ok || !r.trustedOwner(owner) {
			return d
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

func (r *resolver) systemRules() []rule {
	var out []rule
	for _, p := range r.in.SystemView {
		fi, err := os.Lstat(r.host(p))
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if t, err := os.Readlink(r.host(p)); err == nil {
				out = append(out, rule{kind: kSystem, src: t, dst: p, isDir: false, field: "symlink"})
			}
			continue
		}
		out = append(out, rule{kind: kSystem, src: p, dst: p, isDir: fi.IsDir()})
	}
	if r.in.EtcDir != "" {
		return append(out, rule{kind: kSystem, src: r.in.EtcDir, dst: "/etc", isDir: true})
	}
	for _, e := range r.in.SystemEtc {
		p := "/etc/" + e
		fi, err := os.Stat(r.host(p)) // follows links: /etc/localtime and friends
		if err != nil {
			continue
		}
		out = append(out, rule{kind: kSystem, src: p, dst: p, isDir: fi.IsDir()})
	}
	return out
}

func (r *resolver) userRules(cwd string, plan *Plan) ([]rule, error) {
	// The working directory is visible read-only, except "/": running from
	// the root must not expose the whole host.
	// srt-mcp's cache of the sandbox's /etc and the paths the caller hides
	// (the server's state directory) stay out of reach even when a policy
	// exposes a directory above them; no entry may name what is inside.
	r.hidden = nil
	hide := append(append([]string(nil), r.in.Hide...), r.in.Reserved...)
	for _, h := range hide {
		if canon, err := r.canonical(h); err == nil {
			r.hidden = append(r.hidden, canon)
		}
	}
	var out []rule
	if cwd != "/" && !r.privateCwd(cwd) && !r.inExtra(cwd) && r.hiddenBy(cwd) == "" {
		// The working directory is read like any allow_read entry: within
		// the operator's ceiling, where it really is.
		if err := r.checkCeiling(kAllowRead, cwd, "working_directory", r.in.Cwd); err != nil {
			return nil, err
		}
		out = append(out, rule{kind: kAllowRead, src: cwd, dst: cwd, isDir: true, field: "cwd"})
	}
	add := func(kind ruleKind, name string, entries []string) error {
		for i, e := range entries {
			field := fmt.Sprintf("filesystem.%s[%d]", name, i)
			paths, err := r.expand(e, cwd, field, kind)
			if err != nil {
				return err
			}
			for _, p := range paths {
				if err := r.checkCeiling(kind, p.path, field, e); err != nil {
					return err
				}
				out = append(out, rule{kind: kind, src: p.path, dst: p.path, isDir: p.isDir, field: field})
			}
		}
		return nil
	}
	fsys := r.in.FS
	plan.AllowGitConfig = fsys.AllowGitConfig
	if err := add(kAllowRead, "allow_read", fsys.AllowRead); err != nil {
		return nil, err
	}
	if err := add(kAllowWrite, "allow_write", fsys.AllowWrite); err != nil {
		return nil, err
	}
	if err := add(kDenyRead, "deny_read", fsys.DenyRead); err != nil {
		return nil, err
	}
	if err := add(kDenyWrite, "deny_write", fsys.DenyWrite); err != nil {
		return nil, err
	}
	for _, e := range fsys.DenyWrite {
		plan.DenyWriteGlobs = append(plan.DenyWriteGlobs, policy.ExpandPath(e, cwd, r.in.Home))
	}
	for _, h := range r.hidden {
		if fi, err := os.Stat(r.host(h)); err == nil {
			out = append(out, rule{kind: kDenyRead, src: h, dst: h, isDir: fi.IsDir(), field: "hidden"})
		}
	}
	// The implicit read of the working directory gives way to a deny_read
	// of it or of a directory above it (an explicit allow_read does not).
	if len(out) > 0 && out[0].field == "cwd" {
		for _, ru := range out {
			if ru.kind == kDenyRead && policy.Within(cwd, ru.dst) {
				out = out[1:]
				break
			}
		}
	}
	for i, m := range r.in.Extra {
		field := fmt.Sprintf("mounts[%d]", i)
		if !filepath.IsAbs(m.Src) || !filepath.IsAbs(m.Dst) {
			return nil, errorf(ErrCodeInvalidSpec, "%s: src and dst must be absolute", field)
		}
		src, err := r.canonical(m.Src)
		if err != nil {
			return nil, errorf(ErrCodeInvalidSpec, "%s %q: %v", field, m.Src, plainErr(err))
		}
		fi, err := os.Stat(r.host(src))
		if err != nil {
			return nil, errorf(ErrCodeInvalidSpec, "%s %q: %v", field, m.Src, plainErr(err))
		}
		if err := r.checkReserved(filepath.Clean(m.Dst)); err != "" {
			return nil, errorf(ErrCodeInvalidSpec, "%s dst %q: %s", field, m.Dst, err)
		}
		kind := kExtraRO
		if m.Writable {
			kind = kExtraRW
		}
		out = append(out, rule{kind: kind, src: src, dst: filepath.Clean(m.Dst), isDir: fi.IsDir(), field: field})
	}
	return out, nil
}

// privateCwd reports whether the working directory is the sandbox's own
// (under its private /tmp) rather than a host directory.
func (r *resolver) privateCwd(cwd string) bool {
	return cwd == SandboxTmp || (r.in.PrivateCwd && policy.Within(cwd, SandboxTmp))
}

// inExtra reports whether p lies inside an extra mount's destination.
func (r *resolver) inExtra(p string) bool {
	for _, m := range r.in.Extra {
		if policy.Within(p, filepath.Clean(m.Dst)) {
			return true
		}
	}
	return false
}

// checkCeiling refuses an allow entry that resolved outside the
// operator's ceiling.
func (r *resolver) checkCeiling(kind ruleKind, path, field, entry string) error {
	c := r.in.Ceiling
	if c == nil || (kind != kAllowRead && kind != kAllowWrite) {
		return nil
	}
	roots := c.Write
	if kind == kAllowRead {
		roots = append(append([]string(nil), c.Read...), c.Write...)
	}
	for _, root := range roots {
		if canon, err := r.canonical(root); err == nil && policy.Within(path, canon) {
			return nil
		}
	}
	return &policy.Error{Code: policy.CodeExceedsCeiling, Field: field, Value: entry,
		Message: fmt.Sprintf("resolves to %s, outside the operator's ceiling (%s)", path, strings.Join(roots, ", "))}
}

type expanded struct {
	path  string
	isDir bool
}

// expand turns one policy entry into canonical existing paths.
func (r *resolver) expand(entry, cwd, field string, kind ruleKind) ([]expanded, error) {
	abs := policy.ExpandPath(entry, cwd, r.in.Home)
	bad := func(msg string) error {
		return &policy.Error{Code: policy.CodeInvalidPath, Field: field, Value: entry, Message: msg}
	}
	if reason := r.checkReserved(abs); reason != "" {
		return nil, bad(reason)
	}
	var candidates []string
	if policy.IsGlob(entry) {
		pattern := abs
		if r.in.Root != "" {
			pattern = filepath.Join(policy.EscapeGlob(r.in.Root), abs)
		}
		matches, err := doublestar.FilepathGlob(pattern, doublestar.WithNoFollow())
		if err != nil {
			return nil, bad("malformed glob pattern: " + err.Error())
		}
		for _, m := range matches {
			if r.in.Root != "" {
				m = "/" + strings.TrimPrefix(strings.TrimPrefix(m, r.in.Root), "/")
			}
			candidates = append(candidates, m)
		}
	} else {
		if _, err := os.Lstat(r.host(abs)); err != nil {
			if kind == kAllowRead || kind == kAllowWrite {
				return nil, bad(fmt.Sprintf("%s does not exist; create it first or remove the entry", abs))
			}
			return nil, nil // nothing to hide or protect yet
		}
		candidates = []string{abs}
	}
	var out []expanded
	for _, c := range candidates {
		resolve := r.canonical
		if kind == kAllowRead || kind == kAllowWrite {
			resolve = r.canonicalGrant
		}
		canon, err := resolve(c)
		if err != nil {
			var pe *fs.PathError
			if (kind == kDenyRead || kind == kDenyWrite) && errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist) {
				continue // a dangling link: nothing there to hide or protect
			}
			return nil, bad(fmt.Sprintf("cannot resolve %s: %v", c, plainErr(err)))
		}
		if canon == SandboxTmp || canon == SandboxShm {
			continue // the sandbox's own private /tmp; the host's is never shared
		}
		if reason := r.checkReserved(canon); reason != "" {
			return nil, bad(fmt.Sprintf("resolves to %s: %s", canon, reason))
		}
		if h := r.hiddenBy(canon); h != "" {
			if kind == kDenyRead || kind == kDenyWrite {
				continue // hidden already
			}
			return nil, bad(fmt.Sprintf("resolves to %s, inside %s, which srt-mcp keeps out of every sandbox; remove the entry", canon, h))
		}
		fi, err := os.Stat(r.host(canon))
		if err != nil {
			return nil, bad(fmt.Sprintf("cannot stat %s: %v", canon, plainErr(err)))
		}
		out = append(out, expanded{path: canon, isDir: fi.IsDir()})
	}
	return out, nil
}

func (r *resolver) checkReserved(p string) string {
	for _, d := range []string{"/proc", "/dev"} {
		if policy.Within(p, d) {
			return d + " is provided by the sandbox itself; remove the entry"
		}
	}
	for _, d := range r.in.Reserved {
		if policy.Within(p, d) {
			return "srt-mcp's own cache directory may not be named; remove the entry"
		}
	}
	return ""
}

// protectedRules finds the mandatory write-denied names that exist inside
// the writable roots (at any depth), and pins
// (self-binds) the directories between each root and each protected path,
// and between each root and each deny_read or deny_write target inside it,
// so that none can be renamed away: a rename of a mount point fails. A
// protected name that is a symlink is not entered; when its target lies in
// a writable root, the target is protected instead.
func (r *resolver) protectedRules(rules []rule, states map[string]state) ([]rule, error) {
	var out []rule
	seen := map[string]bool{}
	var roots []rule
	for _, ru := range rules {
		if (ru.kind == kAllowWrite || ru.kind == kExtraRW) && states[ru.dst] == stRW && ru.isDir {
			roots = append(roots, ru)
		}
	}
	pin := func(root rule, dst string) {
		rel, err := filepath.Rel(root.dst, dst)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return
		}
		for d := filepath.Dir(rel); d != "." && d != "/"; d = filepath.Dir(d) {
			p := filepath.Join(root.dst, d)
			out = append(out, rule{kind: kPin, src: filepath.Join(root.src, d), dst: p, isDir: true})
		}
	}
	for _, ru := range roots {
		if seen[ru.dst] {
			continue
		}
		seen[ru.dst] = true
		found, err := r.findProtected(ru.src)
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			src, dst := filepath.Join(ru.src, f.rel), filepath.Join(ru.dst, f.rel)
			r.found = append(r.found, dst)
			if f.link {
				target, err := r.canonical(src)
				if err != nil {
					continue // dangling: nothing to protect
				}
				for _, w := range roots {
					if policy.Within(target, w.src) && w.src == w.dst {
						fi, err := os.Stat(r.host(target))
						if err != nil {
							break
						}
						out = append(out, rule{kind: kMandatory, src: target, dst: target, isDir: fi.IsDir()})
						pin(w, target)
						break
					}
				}
				continue
			}
			out = append(out, rule{kind: kMandatory, src: src, dst: dst, isDir: f.dir})
			pin(ru, dst)
		}
	}
	// deny_read and deny_write targets inside a writable root: their
	// parents are pinned, so a run cannot move the target away and put
	// something else (or nothing) at its name for this run or the next.
	for _, ru := range rules {
		if ru.kind != kDenyRead && ru.kind != kDenyWrite {
			continue
		}
		var best *rule
		for i := range roots {
			if policy.Within(ru.dst, roots[i].dst) && ru.dst != roots[i].dst && (best == nil || depth(roots[i].dst) > depth(best.dst)) {
				best = &roots[i]
			}
		}
		if best != nil {
			pin(*best, ru.dst)
		}
	}
	return out, nil
}

// protectedName is one protected name found in a writable root.
type protectedName struct {
	rel  string
	dir  bool
	link bool
}

// findProtected walks root (a canonical host path) at any depth (to the
// sweep's, within maxScan entries) and returns the protected names that
// exist. Every one of them is then mounted read-only: a user's deep
// .bashrc or .git/hooks must not be writable during a run, since the
// sweep would then remove the overwritten file and the original with it.
// It never follows a link: a symbolic link to a directory is not entered,
// a link with a protected name is reported as a link.
func (r *resolver) findProtected(root string) ([]protectedName, error) {
	var found []protectedName
	f := &r.in.FS
	top, err := nofollow.OpenDir(r.host(root))
	if err != nil {
		return nil, nil // unreadable or not what it was: the mount of it fails later
	}
	defer top.Close()
	var walk func(dir *nofollow.Dir, rel string, depth int) error
	walk = func(dir *nofollow.Dir, rel string, depth int) error {
		var subdirs []string
		var werr error
		err := dir.ReadDir(func(e nofollow.Entry) error {
			if r.scanned++; r.scanned > maxScan {
				werr = errorf(ErrCodeInvalidPolicy, "more than %d entries under the writable paths while looking for protected files (.git/hooks, .bashrc, ...); narrow allow_write", maxScan)
				return werr
			}
			name := e.Name
			crel := filepath.Join(rel, name)
			isGitFile := name == ".git" && e.Type == 0
			if f.IsMandatoryDenied(filepath.ToSlash(crel), isGitFile) {
				found = append(found, protectedName{rel: crel, dir: e.IsDir(), link: e.Type == fs.ModeSymlink})
				return nil
			}
			if name == ".git" && e.IsDir() || name == ".claude" && e.IsDir() {
				subs := f.MandatoryBelow(name)
				sub, err := dir.Sub(name)
				if err != nil {
					return nil
				}
				for _, s := range subs {
					srel := filepath.Join(crel, s)
					if st, err := sub.Lstat(s); err == nil && f.IsMandatoryDenied(filepath.ToSlash(srel), false) {
						found = append(found, protectedName{rel: srel, dir: st.IsDir(), link: st.Mode&fs.ModeSymlink != 0})
					}
				}
				if name == ".git" {
					// Submodules' git directories, at any depth below
					// .git/modules: their configs and hooks.
					if mods, err := sub.Sub("modules"); err == nil {
						werr = walk(mods, filepath.Join(crel, "modules"), depth+1)
						mods.Close()
					}
					sub.Close()
					return werr
				}
				sub.Close()
			}
			if e.IsDir() && depth < maxSweepDepth && !gitStore(crel) {
				subdirs = append(subdirs, name)
			}
			return nil
		})
		if werr != nil {
			return werr
		}
		if err != nil {
			return nil
		}
		for _, name := range subdirs {
			sub, err := dir.Sub(name)
			if err != nil {
				continue
			}
			err = walk(sub, filepath.Join(rel, name), depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(top, "", 0); err != nil {
		return nil, err
	}
	return found, nil
}

// gitStore reports whether rel is a submodule git directory's object or
// ref store (.git/modules/<name>/objects, ...): nothing git configures
// itself from, and often most of the entries, so not walked.
func gitStore(rel string) bool {
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, ".git/modules/") && !strings.Contains(rel, "/.git/modules/") {
		return false
	}
	switch path.Base(rel) {
	case "objects", "refs", "logs", "lfs":
		return true
	}
	return false
}

// procMounts makes Docker's read-only and masked /proc paths so in the
// sandbox's own procfs, for those the host's has.
func procMounts(procDir string) []Mount {
	if procDir == "" {
		procDir = "/proc"
	}
	var out []Mount
	exists := func(name string) (os.FileInfo, bool) {
		fi, err := os.Lstat(filepath.Join(procDir, name))
		return fi, err == nil
	}
	for _, n := range procReadOnly {
		if _, ok := exists(n); ok {
			out = append(out, Mount{Kind: MountRO, Src: "/proc/" + n, Dst: "/proc/" + n, System: true})
		}
	}
	for _, n := range procMaskedFiles {
		if fi, ok := exists(n); ok && !fi.IsDir() {
			out = append(out, Mount{Kind: MountHideFile, Dst: "/proc/" + n})
		}
	}
	for _, n := range procMaskedDirs {
		if fi, ok := exists(n); ok && fi.IsDir() {
			out = append(out, Mount{Kind: MountTmpfs, Dst: "/proc/" + n, Size: 4096})
		}
	}
	return out
}

// evaluate applies the precedence rules in depth order and returns the
// mounts to make (without the fixed ones) and the resulting state per path.
//
// At one path: allow_write makes it writable; allow_read makes a hidden or
// invisible path readable; deny_read hides it unless allow_read is also
// there; deny_write, a mandatory name, or a pin under a read-only parent
// leaves it read-only. A deeper path always overrides its parent.
func evaluate(rules []rule) ([]Mount, map[string]state) {
	byDst := map[string][]rule{}
	var dsts []string
	for _, ru := range rules {
		if _, ok := byDst[ru.dst]; !ok {
			dsts = append(dsts, ru.dst)
		}
		byDst[ru.dst] = append(byDst[ru.dst], ru)
	}
	sortByDepth(dsts)
	states := map[string]state{}
	inherited := func(p string) state {
		for d := p; ; {
			parent := filepath.Dir(d)
			if parent == d {
				return stInvisible
			}
			if s, ok := states[parent]; ok {
				return s
			}
			d = parent
		}
	}
	var mounts []Mount
	for _, dst := range dsts {
		rs := byDst[dst]
		has := func(k ruleKind) *rule {
			for i := range rs {
				if rs[i].kind == k {
					return &rs[i]
				}
			}
			return nil
		}
		inh := inherited(dst)
		if dst == "/" {
			inh = stInvisible
		}
		if has(kFixed) != nil {
			states[dst] = stPrivate
			continue
		}
		st := inh
		var src *rule
		if sys := has(kSystem); sys != nil && (inh == stRO || inh == stRW) && len(rs) == 1 {
			// A host bind of an ancestor already shows the host's own entry.
			states[dst] = inh
			continue
		}
		if sys := has(kSystem); sys != nil {
			if sys.field == "symlink" {
				if inh != stHidden {
					mounts = append(mounts, Mount{Kind: MountSymlink, Src: sys.src, Dst: dst})
					states[dst] = stRO
				} else {
					states[dst] = stHidden
				}
				continue
			}
			if inh != stHidden {
				st, src = stRO, sys
			}
		}
		if x := has(kExtraRO); x != nil {
			st, src = stRO, x
		}
		if x := has(kExtraRW); x != nil {
			st, src = stRW, x
		}
		if w := has(kAllowWrite); w != nil {
			st, src = stRW, w
		}
		ar := has(kAllowRead)
		if ar != nil && (st == stInvisible || st == stHidden || st == stPrivate) {
			st, src = stRO, ar
		}
		if dr := has(kDenyRead); dr != nil && ar == nil {
			st, src = stHidden, dr
		}
		if st == stRW {
			if d := has(kMandatory); d != nil {
				st, src = stRO, d
			} else if d := has(kDenyWrite); d != nil {
				st, src = stRO, d
			}
		}
		pin := has(kPin)
		pinned := pin != nil && st == stRW
		states[dst] = st
		switch {
		case st == stRW && src == nil && pinned:
			mounts = append(mounts, Mount{Kind: MountRW, Src: pin.src, Dst: dst})
		case st == stHidden:
			if inh == stRO || inh == stRW {
				if src.isDir {
					mounts = append(mounts, Mount{Kind: MountTmpfs, Dst: dst, Size: 4096})
				} else {
					mounts = append(mounts, Mount{Kind: MountHideFile, Dst: dst})
				}
			}
		case st == stRO && src != nil:
			if inh != stRO || src.src != dst || src.kind == kExtraRO {
				mounts = append(mounts, Mount{Kind: MountRO, Src: src.src, Dst: dst, System: src.kind == kSystem})
			}
		case st == stRW && src != nil:
			if inh != stRW || src.src != dst || pinned {
				mounts = append(mounts, Mount{Kind: MountRW, Src: src.src, Dst: dst})
			}
		}
	}
	return mounts, states
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

func sortByDepth(ps []string) {
	sort.SliceStable(ps, func(i, j int) bool {
		di, dj := depth(ps[i]), depth(ps[j])
		if di != dj {
			return di < dj
		}
		return ps[i] < ps[j]
	})
}

// mergeByDepth interleaves the fixed mounts with the rule mounts so that a
// mount never lands before the mount of its parent directory.
func mergeByDepth(rules, fixed []Mount) []Mount {
	all := append(append([]Mount{}, rules...), fixed...)
	sort.SliceStable(all, func(i, j int) bool {
		di, dj := depth(all[i].Dst), depth(all[j].Dst)
		if di != dj {
			return di < dj
		}
		return all[i].Dst < all[j].Dst
	})
	return all
}

func dedupe(ss []string) []string {
	sort.Strings(ss)
	out := ss[:0]
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

func plainErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
