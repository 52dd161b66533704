package policy

import (
	"path"
	"strings"
)

// MandatoryDenyFiles are names that are write-denied wherever they appear
// inside a writable path: each is read and acted on by a program outside the
// sandbox (a shell, git, an editor, an agent), so writing one is a way out.
var MandatoryDenyFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
	".zshrc", ".zprofile", ".zshenv", ".zlogin",
	".profile", ".gitconfig", ".gitmodules", ".ripgreprc", ".mcp.json",
	// Beyond srt's list: files that tell git to read its configuration
	// from elsewhere (another common directory, a per-worktree config).
	".git/commondir", ".git/config.worktree",
}

// MandatoryDenyDirs are directories that are write-denied, with everything in
// them, wherever they appear inside a writable path.
var MandatoryDenyDirs = []string{
	".vscode", ".idea", ".claude/commands", ".claude/agents",
	".git/hooks", ".git/worktrees",
}

// GitConfig is denied too unless Filesystem.AllowGitConfig is set.
const GitConfig = ".git/config"

// MandatoryDenyPaths lists the relative names the mandatory write-deny
// covers, files and directories alike.
func (f *Filesystem) MandatoryDenyPaths() []string {
	out := append(append([]string{}, MandatoryDenyFiles...), MandatoryDenyDirs...)
	if !f.AllowGitConfig {
		out = append(out, GitConfig)
	}
	return out
}

// MandatoryBelow lists the mandatory names directly inside a directory
// named dir (".git", ".claude"): "hooks", "config", ... for ".git".
func (f *Filesystem) MandatoryBelow(dir string) []string {
	var out []string
	for _, p := range f.MandatoryDenyPaths() {
		if rest, ok := strings.CutPrefix(p, dir+"/"); ok && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	return out
}

// IsMandatoryDenied reports whether rel (a slash-separated path relative to a
// writable root) is, or lies inside, a mandatory write-denied name. When
// .git is a file (a worktree or submodule pointer) the ".git" file itself is
// denied, which the caller checks with gitFile.
func (f *Filesystem) IsMandatoryDenied(rel string, gitFile bool) bool {
	rel = path.Clean(rel)
	parts := strings.Split(rel, "/")
	for i := range parts {
		tail := strings.Join(parts[i:], "/")
		base := parts[i]
		for _, n := range MandatoryDenyFiles {
			if tail == n {
				return true
			}
		}
		for _, d := range MandatoryDenyDirs {
			if tail == d || strings.HasPrefix(tail, d+"/") {
				return true
			}
		}
		if !f.AllowGitConfig && tail == GitConfig {
			return true
		}
		if gitFile && base == ".git" && i == len(parts)-1 {
			return true
		}
		if base == ".git" && i+1 < len(parts) && parts[i+1] == "modules" && inSubmoduleGitDir(parts[i+2:]) {
			return true
		}
	}
	return false
}

// inSubmoduleGitDir reports whether rest, a path below .git/modules (the
// git directories of submodules, nested ones included), is one of the
// names a git directory reads its configuration or hooks from: git in the
// main checkout reads a submodule's config (core.fsmonitor) and runs its
// hooks.
func inSubmoduleGitDir(rest []string) bool {
	for k, c := range rest {
		if k == 0 {
			continue // the submodule's name
		}
		if c == "hooks" || c == "worktrees" {
			return true
		}
		if k == len(rest)-1 && (c == "config" || c == "commondir" || c == "config.worktree") {
			return true
		}
	}
	return false
}

// SystemView is the read-only part of the host every sandbox sees, when it
// exists on the host. It is deliberately not "/": home directories, /root,
// /var, /srv, /opt, /mnt and the rest of /etc stay invisible unless a policy
// names them in allow_read or allow_write.
var SystemView = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
}

// SystemEtc are the entries of /etc the system view includes: name service,
// dynamic linker, locale, time zone, TLS trust, terminal and the language
// runtimes' own configuration. Everything else in /etc (shadow, ssh, the
// host's credentials and service configs) is not mounted.
var SystemEtc = []string{
	"passwd", "group", "nsswitch.conf", "hosts", "host.conf", "gai.conf",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "locale.alias", "locale.conf", "default/locale",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"alternatives", "mime.types", "magic", "os-release", "debian_version", "lsb-release",
	"protocols", "services", "terminfo", "inputrc", "bash.bashrc", "profile", "profile.d",
	"fonts", "matplotlibrc", "python3", "python3.11", "python3.12", "python3.13",
	"perl", "php", "R", "java-17-openjdk", "java-21-openjdk", "ImageMagick-6",
	"mailcap", "xdg",
}
