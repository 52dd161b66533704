package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Pattern is one parsed entry of allowed_domains or denied_domains.
//
// Grammar (case-insensitive, a trailing dot is ignored):
//
//	example.com          that name exactly, any port
//	*.example.com        strict subdomains of example.com (not example.com itself)
//	example.com:443      that name on port 443 only (also *.example.com:443)
//	127.0.0.1, [::1]:80  an IP literal (any spelling inet_aton accepts, canonicalised)
//	*                    every host (denied_domains only)
//	*:22                 every host on port 22 (denied_domains only)
//
// Wildcards never match IP literals. Rejected: URLs, paths, empty labels,
// wildcards anywhere but the first label, and wildcards over a bare top-level
// domain ("*.com") in allowed_domains.
type Pattern struct {
	Raw      string     // the entry as written
	Host     string     // canonical host (no leading "*."); "" for "*"
	Wildcard bool       // "*.Host"
	Any      bool       // "*": every host
	IP       netip.Addr // valid when the host is an IP literal
	Port     int        // 0 = any port
}

// ParsePattern parses one domain entry. inDenyList permits the catch-all
// forms that would be dangerous in an allow list.
func ParsePattern(s string, inDenyList bool) (Pattern, error) {
	p := Pattern{Raw: s}
	raw := strings.TrimSpace(s)
	if raw == "" {
		return p, errors.New("empty entry")
	}
	if raw != s {
		return p, errors.New("leading or trailing whitespace")
	}
	if strings.Contains(raw, "://") || strings.ContainsAny(raw, "/?#@ \t") {
		return p, errors.New("a domain entry is a host name with an optional :port, not a URL or path (e.g. \"api.example.com\" or \"api.example.com:443\")")
	}
	host, port, err := splitHostPort(raw)
	if err != nil {
		return p, err
	}
	p.Port = port
	if host == "*" {
		if !inDenyList {
			return p, errors.New("\"*\" would allow every host; list the domains to allow (\"*\" is only valid in denied_domains)")
		}
		p.Any = true
		return p, nil
	}
	if strings.HasPrefix(host, "*.") {
		p.Wildcard = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return p, errors.New("a wildcard is only allowed as the whole first label, as in \"*.example.com\"")
	}
	if ip, ok := ParseIP(host); ok {
		if p.Wildcard {
			return p, errors.New("wildcards do not apply to IP addresses")
		}
		p.IP = ip
		p.Host = ip.String()
		return p, nil
	}
	name, err := canonicalName(host)
	if err != nil {
		return p, err
	}
	if p.Wildcard && !inDenyList {
		if !strings.Contains(name, ".") {
			return p, fmt.Errorf("\"*.%s\" covers a whole top-level domain; name the domains to allow", name)
		}
		if name == "localhost" || strings.HasSuffix(name, ".localhost") {
			return p, errors.New("wildcards over localhost are not allowed")
		}
	}
	p.Host = name
	return p, nil
}

// String renders the pattern in canonical form.
func (p Pattern) String() string {
	h := p.Host
	switch {
	case p.Any:
		h = "*"
	case p.Wildcard:
		h = "*." + h
	case p.IP.Is6():
		h = "[" + h + "]"
	}
	if p.Port != 0 {
		return h + ":" + strconv.Itoa(p.Port)
	}
	return h
}

// Match reports whether the canonical host (see CanonicalHost) and port match.
func (p Pattern) Match(host string, port int) bool {
	if p.Port != 0 && p.Port != port {
		return false
	}
	if p.Any {
		return true
	}
	if p.IP.IsValid() {
		return host == p.Host
	}
	if p.Wildcard {
		if _, isIP := ParseIP(host); isIP {
			return false
		}
		return strings.HasSuffix(host, "."+p.Host)
	}
	return host == p.Host
}

func splitHostPort(s string) (host string, port int, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", 0, errors.New("unterminated \"[\" in IPv6 literal")
		}
		host, rest := s[1:end], s[end+1:]
		if _, err := netip.ParseAddr(host); err != nil {
			return "", 0, fmt.Errorf("invalid IPv6 address %q", host)
		}
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, errors.New("unexpected text after \"]\"")
		}
		port, err := parsePort(rest[1:])
		return host, port, err
	}
	if strings.Count(s, ":") > 1 {
		// A bare IPv6 literal without a port.
		if _, err := netip.ParseAddr(s); err != nil {
			return "", 0, errors.New("an IPv6 address must be written in brackets, as in \"[::1]:443\"")
		}
		return s, 0, nil
	}
	if i := strings.LastIndex(s, ":"); i >= 0 {
		port, err := parsePort(s[i+1:])
		return s[:i], port, err
	}
	return s, 0, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '0' || s[0] == '+' {
		return 0, fmt.Errorf("invalid port %q: use a number from 1 to 65535", s)
	}
	return n, nil
}

// canonicalName lower-cases a host name, drops one trailing dot, and checks
// every label.
func canonicalName(h string) (string, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" {
		return "", errors.New("empty host name")
	}
	if len(h) > 253 {
		return "", errors.New("host name longer than 253 characters")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return "", errors.New("empty label (\"..\" or a leading dot) in host name")
		}
		if len(label) > 63 {
			return "", errors.New("a host name label is longer than 63 characters")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return "", fmt.Errorf("invalid character %q in host name", c)
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", errors.New("a host name label may not start or end with \"-\"")
		}
	}
	return h, nil
}

// CanonicalHost returns the form of a requested host that patterns are
// matched against: IP literals in any inet_aton spelling become dotted quads,
// IPv4-mapped IPv6 becomes IPv4, names are lower-cased without a trailing dot.
func CanonicalHost(h string) (string, error) {
	h = strings.TrimPrefix(strings.TrimSuffix(h, "]"), "[")
	if ip, ok := ParseIP(h); ok {
		return ip.String(), nil
	}
	return canonicalName(h)
}

// ParseIP parses an IP literal the way the C library's inet_aton does for
// IPv4 (so "2130706433", "0x7f.1" and "0177.0.0.1" are all 127.0.0.1) and
// netip does for IPv6. IPv4-mapped IPv6 addresses are unmapped.
func ParseIP(s string) (netip.Addr, bool) {
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	parts := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseInetNumber(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i := 0; i < last; i++ {
		if vals[i] > 255 {
			return netip.Addr{}, false
		}
		n |= vals[i] << (24 - 8*uint(i))
	}
	if vals[last] >= 1<<(8*uint(4-last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func parseInetNumber(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true // "0x" is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Decision is the outcome of checking one destination against a Network policy.
type Decision struct {
	Allow bool
	Rule  string // the pattern that decided, or a fixed reason
	// Reason is the operator's deniedDomainReasons text for the deny
	// entry that decided, if it has one: what the caller is told.
	Reason string
}

// Reasons used in Decision.Rule when no pattern decided.
const (
	RuleNotAllowed  = "not in allowed_domains"
	RuleNoNetwork   = "network disabled (allowed_domains is empty)"
	RuleInvalidHost = "invalid host"
)

// Decider answers allow/deny for destinations, with deny beating allow.
type Decider struct {
	allow, deny []Pattern
	reasons     map[string]string
	deniedAddrs []netip.Prefix
}

// NewDecider compiles a Network policy. It fails on the first invalid entry.
func NewDecider(n Network) (*Decider, error) {
	d := &Decider{reasons: n.DeniedDomainReasons}
	var err error
	if d.deniedAddrs, err = n.DeniedAddressRanges(); err != nil {
		return nil, err
	}
	for i, s := range n.AllowedDomains {
		p, err := ParsePattern(s, false)
		if err != nil {
			return nil, &Error{Code: CodeInvalidDomain, Field: fmt.Sprintf("network.allowed_domains[%d]", i), Value: s, Message: err.Error()}
		}
		d.allow = append(d.allow, p)
	}
	for i, s := range n.DeniedDomains {
		p, err := ParsePattern(s, true)
		if err != nil {
			return nil, &Error{Code: CodeInvalidDomain, Field: fmt.Sprintf("network.denied_domains[%d]", i), Value: s, Message: err.Error()}
		}
		d.deny = append(d.deny, p)
	}
	return d, nil
}

// Decide checks host (any spelling) and port.
func (d *Decider) Decide(host string, port int) Decision {
	h, err := CanonicalHost(host)
	if err != nil || port < 1 || port > 65535 {
		return Decision{Rule: RuleInvalidHost}
	}
	for _, p := range d.deny {
		if p.Match(h, port) {
			return Decision{Rule: "denied_domains: " + p.Raw, Reason: d.reasons[p.Raw]}
		}
	}
	if len(d.allow) == 0 {
		return Decision{Rule: RuleNoNetwork}
	}
	for _, p := range d.allow {
		if p.Match(h, port) {
			return Decision{Allow: true, Rule: "allowed_domains: " + p.Raw}
		}
	}
	return Decision{Rule: RuleNotAllowed}
}

// DeniedAddr reports whether a deny entry or a denied_resolved_addresses
// range names the address a (or an IPv4 address embedded in it) on port:
// denied_domains applies to where a name leads, not only to how it is
// spelled. embedded lists a's IPv4 forms.
func (d *Decider) DeniedAddr(a netip.Addr, port int, embedded ...netip.Addr) (string, bool) {
	cands := append([]netip.Addr{a.Unmap()}, embedded...)
	for _, r := range d.deniedAddrs {
		for _, c := range cands {
			if r.Contains(c) {
				return "denied_resolved_addresses: " + r.String(), true
			}
		}
	}
	for _, p := range d.deny {
		if !p.IP.IsValid() && !p.Any {
			continue
		}
		for _, c := range cands {
			if p.Match(c.String(), port) {
				return "denied_domains: " + p.Raw, true
			}
		}
	}
	return "", false
}

// ReasonFor returns the operator's reason for a deny rule DeniedAddr or
// Decide reported ("" when it has none).
func (d *Decider) ReasonFor(rule string) string {
	return d.reasons[strings.TrimPrefix(rule, "denied_domains: ")]
}

// Enabled reports whether any destination could be allowed.
func (d *Decider) Enabled() bool { return len(d.allow) > 0 }
