package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/srt-mcp/srt-mcp/errs"
)

// CodeExceedsCeiling marks a call that asked for more than the operator's
// ceiling allows.
const CodeExceedsCeiling = errs.ExceedsCeiling

// Narrow applies a call's sandbox_config to the operator's ceiling. A call
// may only narrow: every allowed domain must be covered by the ceiling's,
// every readable or writable path must lie inside the ceiling's, and limits
// may only go down. Denies are always accepted and added. Operator-level
// settings (allowed_ip_ranges, hosts) may not appear in a call. The error
// names the offending entry and what the ceiling allows; nothing is
// silently widened or dropped.
//
// Paths are compared after ExpandPath (relative to cwd); the runner checks
// them again after resolving symlinks (Spec.Ceiling), so a link cannot
// smuggle a path out.
func Narrow(ceiling, call Policy, cwd, home string) (Policy, error) {
	out := ceiling
	over := func(field, value, msg string) error {
		return &Error{Code: CodeExceedsCeiling, Field: field, Value: value, Message: msg}
	}
	if call.Credentials != nil && call.Credentials.Use == nil {
		return out, over("credentials", "", "credentials are declared by the operator; a call lists the names it uses, such as [\"GH_TOKEN\"]")
	}
	if err := call.Validate(); err != nil {
		return out, err
	}
	n, c := call.Network, ceiling.Network
	if len(n.AllowedIPRanges) > 0 {
		return out, over("network.allowed_ip_ranges", strings.Join(n.AllowedIPRanges, ","), "address ranges are set by the operator, not per call; remove the field")
	}
	if len(n.Hosts) > 0 {
		return out, over("network.hosts", "", "host pins are set by the operator, not per call; remove the field")
	}
	if n.AllowedDomains != nil {
		ceil := parseAll(c.AllowedDomains, false)
		for i, d := range n.AllowedDomains {
			p, _ := ParsePattern(d, false)
			if !covered(p, ceil) {
				allowed := "nothing (the operator allows no network)"
				if len(c.AllowedDomains) > 0 {
					allowed = strings.Join(c.AllowedDomains, ", ")
				}
				return out, over(fmt.Sprintf("network.allowed_domains[%d]", i), d, "is outside the operator's ceiling; allowed domains: "+allowed)
			}
		}
		out.Network.AllowedDomains = append([]string(nil), n.AllowedDomains...)
	}
	out.Network.DeniedDomains = append(append([]string(nil), c.DeniedDomains...), n.DeniedDomains...)
	if err := narrowEgress(&out, call); err != nil {
		return out, err
	}

	f, cf := call.Filesystem, ceiling.Filesystem
	writeRoots := expandAll(cf.AllowWrite, cwd, home)
	readRoots := append(expandAll(cf.AllowRead, cwd, home), writeRoots...)
	for i, p := range f.AllowWrite {
		abs := ExpandPath(p, cwd, home)
		if !withinAny(abs, writeRoots) && !Within(abs, "/tmp") {
			return out, over(fmt.Sprintf("filesystem.allow_write[%d]", i), p, "is outside the writable paths the operator allows: "+listOrNone(cf.AllowWrite)+" (the sandbox's own /tmp is always writable)")
		}
	}
	for i, p := range f.AllowRead {
		abs := ExpandPath(p, cwd, home)
		if !withinAny(abs, readRoots) && !Within(abs, "/tmp") {
			return out, over(fmt.Sprintf("filesystem.allow_read[%d]", i), p, "is outside the readable paths the operator allows: "+listOrNone(append(append([]string(nil), cf.AllowRead...), cf.AllowWrite...)))
		}
	}
	if f.AllowGitConfig && !cf.AllowGitConfig {
		return out, over("filesystem.allow_git_config", "true", "the operator keeps .git/config write-protected")
	}
	out.Filesystem.AllowRead = append(append([]string(nil), cf.AllowRead...), f.AllowRead...)
	if f.AllowWrite != nil {
		out.Filesystem.AllowWrite = append([]string(nil), f.AllowWrite...)
	}
	out.Filesystem.DenyRead = append(append([]string(nil), cf.DenyRead...), f.DenyRead...)
	out.Filesystem.DenyWrite = append(append([]string(nil), cf.DenyWrite...), f.DenyWrite...)

	l, cl := call.Limits, ceiling.Limits
	lower := func(field string, v, max int64) (int64, error) {
		if v == 0 {
			return max, nil
		}
		if max > 0 && v > max {
			return 0, over("limits."+field, fmt.Sprint(v), fmt.Sprintf("is above the operator's maximum of %d", max))
		}
		return v, nil
	}
	var err error
	var t int64
	if t, err = lower("timeout", int64(l.Timeout), int64(cl.Timeout)); err != nil {
		return out, over("timeout_seconds", l.Timeout.Std().String(), fmt.Sprintf("is above the operator's maximum of %s", cl.Timeout.Std()))
	}
	out.Limits.Timeout = Duration(t)
	if out.Limits.MaxMemoryBytes, err = lower("max_memory_bytes", l.MaxMemoryBytes, cl.MaxMemoryBytes); err != nil {
		return out, err
	}
	if out.Limits.MaxOutputBytes, err = lower("max_output_bytes", l.MaxOutputBytes, cl.MaxOutputBytes); err != nil {
		return out, err
	}
	if out.Limits.MaxFileSizeBytes, err = lower("max_file_size_bytes", l.MaxFileSizeBytes, cl.MaxFileSizeBytes); err != nil {
		return out, err
	}
	if out.Limits.TmpBytes, err = lower("tmp_bytes", l.TmpBytes, cl.TmpBytes); err != nil {
		return out, err
	}
	procs, err := lower("max_processes", int64(l.MaxProcesses), int64(cl.MaxProcesses))
	if err != nil {
		return out, err
	}
	out.Limits.MaxProcesses = int(procs)
	files, err := lower("max_open_files", int64(l.MaxOpenFiles), int64(cl.MaxOpenFiles))
	if err != nil {
		return out, err
	}
	out.Limits.MaxOpenFiles = int(files)
	return out, out.Validate()
}

func parseAll(ss []string, deny bool) []Pattern {
	var out []Pattern
	for _, s := range ss {
		if p, err := ParsePattern(s, deny); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// covered reports whether every destination p matches is matched by one of
// ceil.
func covered(p Pattern, ceil []Pattern) bool {
	for _, c := range ceil {
		if c.Port != 0 && c.Port != p.Port {
			continue // the call wants a port (or every port) the ceiling does not give
		}
		switch {
		case c.Any:
			return true
		case p.IP.IsValid() || (!p.Wildcard && !c.Wildcard):
			if p.Host == c.Host {
				return true
			}
		case !p.Wildcard && c.Wildcard:
			if c.Match(p.Host, max(p.Port, 1)) || strings.HasSuffix(p.Host, "."+c.Host) {
				return true
			}
		case p.Wildcard && c.Wildcard:
			if p.Host == c.Host || strings.HasSuffix(p.Host, "."+c.Host) {
				return true
			}
		}
	}
	return false
}

func expandAll(ps []string, cwd, home string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, ExpandPath(p, cwd, home))
	}
	return out
}

func withinAny(p string, roots []string) bool {
	for _, r := range roots {
		if Within(p, r) {
			return true
		}
	}
	return false
}

func listOrNone(ps []string) string {
	if len(ps) == 0 {
		return "none"
	}
	s := append([]string(nil), ps...)
	sort.Strings(s)
	return strings.Join(s, ", ")
}
