// Package policy holds the pure description of what one sandboxed execution
// may do: which host paths it can see and write, which network destinations it
// may reach, and the resource limits it runs under.
//
// Nothing here touches processes, listeners or the sandbox itself. The package
// owns three things: the types (Policy, Filesystem, Network, Limits), their
// validation with errors that name the offending entry, and the pure decisions
// made from them (path expansion, the mandatory write-deny list, the srt
// settings-file translation). Callers that need the filesystem (symlink
// resolution, glob expansion) do that work themselves and feed the results
// back in; that keeps every decision here testable from testdata/.
package policy

import (
	"fmt"
	"math"
	"net/netip"

	"path/filepath"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/srt-mcp/srt-mcp/errs"
)

// Policy is everything one execution is allowed to do.
type Policy struct {
	Filesystem Filesystem `json:"filesystem"`
	Network    Network    `json:"network"`
	Limits     Limits     `json:"limits"`
	// Credentials are the operator's secrets the sandbox must not read
	// (srt's credentials section); nil: none.
	Credentials *Credentials `json:"credentials,omitempty"`
}

// Filesystem is the path policy, with the field names of seed 002's
// sandbox_config.filesystem. Entries are absolute paths, "~/..." (the caller's
// home), or relative to the execution's working directory; each may be a glob
// ("*", "?", "[...]", "{a,b}", "**").
//
// The sandbox starts from a minimal read-only system view (see SystemView) and
// the working directory, read-only. Then:
//   - AllowRead adds read-only paths, and re-opens paths inside a DenyRead entry;
//   - AllowWrite adds writable paths;
//   - DenyRead hides paths (an empty directory, or an unreadable file);
//   - DenyWrite makes paths read-only even inside an AllowWrite entry.
//
// The deeper path wins; at the same path, AllowRead beats DenyRead and
// DenyWrite beats AllowWrite. MandatoryDenyWrite always applies inside writable
// paths unless AllowGitConfig lifts the .git/config entry.
type Filesystem struct {
	DenyRead       []string `json:"deny_read,omitempty"`
	AllowRead      []string `json:"allow_read,omitempty"`
	AllowWrite     []string `json:"allow_write,omitempty"`
	DenyWrite      []string `json:"deny_write,omitempty"`
	AllowGitConfig bool     `json:"allow_git_config,omitempty"`
}

// Network is the domain allow-list, with seed 002's field names. An empty
// AllowedDomains means no network at all.
type Network struct {
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	DeniedDomains  []string `json:"denied_domains,omitempty"`
	// AllowedIPRanges are address ranges (CIDR) an allowed name may
	// resolve to even though they are loopback, private, link-local or
	// cloud-metadata addresses, which the DNS-rebinding guard otherwise
	// refuses. Operator-level: a call may not widen it.
	AllowedIPRanges []string `json:"allowed_ip_ranges,omitempty"`
	// Hosts pins names to addresses, like /etc/hosts for the proxy only
	// (the guard still applies). Operator-level: a call may not set it.
	Hosts map[string]string `json:"hosts,omitempty"`

	// The rest are srt 0.0.83's network keys beyond name lists (see
	// egress.go). DeniedDomainReasons maps a denied_domains entry to the
	// reason a refused caller is told.
	DeniedDomainReasons map[string]string `json:"denied_domain_reasons,omitempty"`
	// DeniedResolvedAddresses are ranges an allowed name must not resolve
	// to, beyond the guard's.
	DeniedResolvedAddresses []string      `json:"denied_resolved_addresses,omitempty"`
	TLSTerminate            *TLSTerminate `json:"tls_terminate,omitempty"`
	// RefuseOpaqueTunnels refuses every tunnel the proxy cannot see into.
	RefuseOpaqueTunnels bool `json:"refuse_opaque_tunnels,omitempty"`
	// RequireHostMatch answers 421 when Host, SNI or an absolute-form
	// authority disagree with where a request is sent.
	RequireHostMatch bool `json:"require_host_match,omitempty"`
	// AmbiguousRequestTarget is "refuse" (""), "asSpelled" or "normalize".
	AmbiguousRequestTarget string `json:"ambiguous_request_target,omitempty"`
	// AllowPlaintextHeaderSet lets a rule's set_headers apply in cleartext.
	AllowPlaintextHeaderSet bool `json:"allow_plaintext_header_set,omitempty"`
	// StripResponseHeaders are never passed back to the sandbox.
	StripResponseHeaders []string `json:"strip_response_headers,omitempty"`
	// RequestRules are the operator's method and path rules per host;
	// CallRequestRules a call's (Narrow puts them there): a request must
	// pass both.
	RequestRules     []RequestRule `json:"request_rules,omitempty"`
	CallRequestRules []RequestRule `json:"call_request_rules,omitempty"`
}

// Limits bound one execution's resources. Zero means "no limit" for every
// field except where the field says otherwise.
type Limits struct {
	// Timeout is the wall-clock limit for the whole execution.
	Timeout Duration `json:"timeout,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr; past it output is
	// dropped and the execution is flagged as truncated.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// MaxProcesses caps the number of processes (and threads) in the sandbox.
	MaxProcesses int `json:"max_processes,omitempty"`
	// MaxMemoryBytes caps memory: the sandbox's total with cgroup v2, else
	// each process's address space (RLIMIT_AS).
	MaxMemoryBytes int64 `json:"max_memory_bytes,omitempty"`
	// MaxFileSizeBytes caps the size of any file the sandbox writes.
	MaxFileSizeBytes int64 `json:"max_file_size_bytes,omitempty"`
	// MaxOpenFiles caps open file descriptors per process.
	MaxOpenFiles int `json:"max_open_files,omitempty"`
	// TmpBytes is the size of the private /tmp (which also holds HOME).
	TmpBytes int64 `json:"tmp_bytes,omitempty"`
}

// Bounds below which a sandbox cannot start a shell; values under them are a
// configuration mistake, not a tighter sandbox.
const (
	MinMemoryBytes = 32 << 20
	MinProcesses   = 4
	MinTmpBytes    = 1 << 20
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("30s", "1m30s") and also accepts a number of seconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// UnmarshalJSON accepts "90s" or 90 (seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, `"`) {
		v, err := time.ParseDuration(strings.Trim(s, `"`))
		if err != nil {
			return fmt.Errorf("invalid duration %s: use a number of seconds or a string like \"30s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if _, err := fmt.Sscanf(s, "%g", &secs); err != nil {
		return fmt.Errorf("invalid duration %s: use a number of seconds or a string like \"30s\"", s)
	}
	if math.IsNaN(secs) || math.IsInf(secs, 0) || secs*float64(time.Second) >= math.MaxInt64 || secs*float64(time.Second) <= math.MinInt64 {
		return fmt.Errorf("invalid duration %s: too large; use at most %d seconds", s, int64(math.MaxInt64/int64(time.Second)))
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Std returns the value as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Error is a validation failure that names the entry to change.
type Error = errs.Error

// Error codes returned in Error.Code.
const (
	CodeInvalidPath     = errs.InvalidPath
	CodeInvalidDomain   = errs.InvalidDomain
	CodeInvalidLimit    = errs.InvalidLimit
	CodeInvalidSettings = errs.InvalidSettings
	CodeUnsupported     = "unsupported_setting"
)

// Validate checks the policy's syntax. It does not look at the filesystem:
// whether a path exists is decided when the sandbox is planned.
func (p *Policy) Validate() error {
	lists := []struct {
		name  string
		items []string
	}{
		{"filesystem.deny_read", p.Filesystem.DenyRead},
		{"filesystem.allow_read", p.Filesystem.AllowRead},
		{"filesystem.allow_write", p.Filesystem.AllowWrite},
		{"filesystem.deny_write", p.Filesystem.DenyWrite},
	}
	for _, l := range lists {
		for i, s := range l.items {
			if err := validatePathEntry(s); err != "" {
				return &Error{Code: CodeInvalidPath, Field: fmt.Sprintf("%s[%d]", l.name, i), Value: s, Message: err}
			}
		}
	}
	for i, d := range p.Network.AllowedDomains {
		if _, err := ParsePattern(d, false); err != nil {
			return &Error{Code: CodeInvalidDomain, Field: fmt.Sprintf("network.allowed_domains[%d]", i), Value: d, Message: err.Error()}
		}
	}
	for i, d := range p.Network.DeniedDomains {
		if _, err := ParsePattern(d, true); err != nil {
			return &Error{Code: CodeInvalidDomain, Field: fmt.Sprintf("network.denied_domains[%d]", i), Value: d, Message: err.Error()}
		}
	}
	if _, err := p.Network.Ranges(); err != nil {
		return err
	}
	for name, ip := range p.Network.Hosts {
		if _, err := canonicalName(name); err != nil {
			return &Error{Code: CodeInvalidDomain, Field: "network.hosts", Value: name, Message: err.Error()}
		}
		if _, ok := ParseIP(ip); !ok {
			return &Error{Code: CodeInvalidDomain, Field: "network.hosts." + name, Value: ip, Message: "not an IP address"}
		}
	}
	if err := p.validateEgress(); err != nil {
		return err
	}
	return p.Limits.Validate()
}

// Validate checks that each limit is either unset or usable.
func (l *Limits) Validate() error {
	bad := func(field string, v any, msg string) error {
		return &Error{Code: CodeInvalidLimit, Field: "limits." + field, Value: fmt.Sprint(v), Message: msg}
	}
	switch {
	case l.Timeout < 0:
		return bad("timeout", l.Timeout.Std(), "must not be negative")
	case l.MaxOutputBytes < 0:
		return bad("max_output_bytes", l.MaxOutputBytes, "must not be negative")
	case l.MaxProcesses < 0 || (l.MaxProcesses > 0 && l.MaxProcesses < MinProcesses):
		return bad("max_processes", l.MaxProcesses, fmt.Sprintf("must be 0 (no limit) or at least %d", MinProcesses))
	case l.MaxMemoryBytes < 0 || (l.MaxMemoryBytes > 0 && l.MaxMemoryBytes < MinMemoryBytes):
		return bad("max_memory_bytes", l.MaxMemoryBytes, fmt.Sprintf("must be 0 (no limit) or at least %d (32 MiB)", MinMemoryBytes))
	case l.MaxFileSizeBytes < 0:
		return bad("max_file_size_bytes", l.MaxFileSizeBytes, "must not be negative")
	case l.MaxOpenFiles < 0 || (l.MaxOpenFiles > 0 && l.MaxOpenFiles < 16):
		return bad("max_open_files", l.MaxOpenFiles, "must be 0 (no limit) or at least 16")
	case l.TmpBytes < 0 || (l.TmpBytes > 0 && l.TmpBytes < MinTmpBytes):
		return bad("tmp_bytes", l.TmpBytes, "must be 0 (default) or at least 1 MiB")
	}
	return nil
}

func validatePathEntry(s string) string {
	switch {
	case s == "":
		return "empty path; remove the entry or give a path"
	case strings.ContainsRune(s, 0):
		return "path contains a NUL byte"
	case strings.HasPrefix(s, "~") && s != "~" && !strings.HasPrefix(s, "~/"):
		return "only \"~\" and \"~/...\" (the caller's home) are supported; \"~user\" is not"
	}
	if IsGlob(s) && !doublestar.ValidatePathPattern(s) {
		return "malformed glob pattern (check brackets and braces; write a literal [ as \\[)"
	}
	return ""
}

// IsGlob reports whether a path entry contains glob syntax.
func IsGlob(s string) bool {
	return strings.ContainsAny(s, "*?[{")
}

// ExpandPath turns a policy entry into an absolute, cleaned path: "~" and
// "~/x" are taken from home, relative entries from cwd. It does not resolve
// symlinks. cwd and home must be absolute.
func ExpandPath(entry, cwd, home string) string {
	switch {
	case entry == "~":
		return filepath.Clean(home)
	case strings.HasPrefix(entry, "~/"):
		return filepath.Join(home, entry[2:])
	case filepath.IsAbs(entry):
		return filepath.Clean(entry)
	default:
		return filepath.Join(cwd, entry)
	}
}

// Within reports whether path p is root or below it. Both must be
// absolute; both are cleaned first, so "/tmp/../etc" is not within /tmp.
func Within(p, root string) bool {
	if !filepath.IsAbs(p) || !filepath.IsAbs(root) {
		return false
	}
	p, root = filepath.Clean(p), filepath.Clean(root)
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// Ranges parses AllowedIPRanges.
func (n *Network) Ranges() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, r := range n.AllowedIPRanges {
		pfx, err := netip.ParsePrefix(r)
		if err != nil {
			a, ok := ParseIP(r)
			if !ok {
				return nil, &Error{Code: CodeInvalidDomain, Field: fmt.Sprintf("network.allowed_ip_ranges[%d]", i), Value: r, Message: "not a CIDR range such as 127.0.0.0/8 or an IP address"}
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, pfx.Masked())
	}
	return out, nil
}
