package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
)

// TLSTerminate is srt's network.tlsTerminate: HTTPS tunnels to allowed
// names are opened by the proxy, so request rules and credential injection
// can see into them. Every field is the operator's.
type TLSTerminate struct {
	// CACertPath and CAKeyPath name the interception CA (PEM). Both empty:
	// a CA srt-mcp makes (the server keeps one in its state directory, key
	// 0600; srt-mcp exec makes one per run).
	CACertPath string `json:"ca_cert_path,omitempty"`
	CAKeyPath  string `json:"ca_key_path,omitempty"`
	// ExcludeDomains are tunnelled opaquely (mTLS upstreams, pinning
	// clients): same grammar as allowed_domains.
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
	// ExtraCACertPaths are PEM files whose CERTIFICATE blocks are trusted
	// for upstreams and added to the sandbox's bundle; missing files are
	// skipped.
	ExtraCACertPaths []string `json:"extra_ca_cert_paths,omitempty"`
	// MaxTunnels bounds terminated tunnels open at once (default 256).
	MaxTunnels int `json:"max_tunnels,omitempty"`
	// HandshakeTimeoutMs bounds a tunnel's CONNECT-to-handshake time
	// (default 10000).
	HandshakeTimeoutMs int `json:"handshake_timeout_ms,omitempty"`
}

// Defaults of TLSTerminate, srt's.
const (
	DefaultMaxTunnels         = 256
	DefaultHandshakeTimeoutMs = 10000
)

// Tunnels returns MaxTunnels or its default.
func (t *TLSTerminate) Tunnels() int {
	if t == nil || t.MaxTunnels == 0 {
		return DefaultMaxTunnels
	}
	return t.MaxTunnels
}

// HandshakeMs returns HandshakeTimeoutMs or its default.
func (t *TLSTerminate) HandshakeMs() int {
	if t == nil || t.HandshakeTimeoutMs == 0 {
		return DefaultHandshakeTimeoutMs
	}
	return t.HandshakeTimeoutMs
}

// RequestRule says which requests one host takes (srt-mcp's spelling of
// what srt leaves to a library's filterRequest; the OpenShell and
// OpenSandbox model). A request to a host that some rule names must match
// one of those rules; hosts no rule names take any request their domain
// entry allows. The proxy can only see requests over plain HTTP and in
// terminated tunnels: a CONNECT it would tunnel opaquely to a ruled host
// is refused.
type RequestRule struct {
	// Host is a domain pattern (allowed_domains grammar, :port allowed).
	Host string `json:"host"`
	// Methods the rule allows (upper case); empty: every method but
	// TRACE and TRACK, which are always refused.
	Methods []string `json:"methods,omitempty"`
	// Paths are path prefixes, matched on the normalised path: "/a/"
	// covers everything below /a/; "/a" covers /a and /a/... but not /ab.
	// Empty: every path.
	Paths []string `json:"paths,omitempty"`
	// SetHeaders are fixed header values the proxy sets on matching
	// requests (never secrets: those are credentials). Refused over
	// cleartext unless allow_plaintext_header_set.
	SetHeaders map[string]string `json:"set_headers,omitempty"`
}

// Ambiguous-request-target modes (srt's network.ambiguousRequestTarget).
const (
	TargetRefuse    = "refuse"
	TargetAsSpelled = "asSpelled"
	TargetNormalize = "normalize"
)

// Credentials is srt's credentials section: environment variables and files
// whose real values the sandbox must not read. Entries name sources only;
// values are read on the host when a run starts and never stored in a
// Policy.
type Credentials struct {
	EnvVars []CredentialEnv  `json:"env_vars,omitempty"`
	Files   []CredentialFile `json:"files,omitempty"`
	// AllowPlaintextInject lets masked values be put back into requests
	// sent in cleartext; without it they go out only over verified TLS.
	AllowPlaintextInject bool `json:"allow_plaintext_inject,omitempty"`
	// Use is a call's choice (a sandbox_config "credentials" list of
	// names): the operator's entries it wants. Narrow keeps only those.
	Use []string `json:"-"`
}

// Credential modes.
const (
	CredentialDeny = "deny"
	CredentialMask = "mask"
)

// CredentialEnv is one environment variable entry.
type CredentialEnv struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	// InjectHosts are the hosts the real value may be sent to (domain
	// patterns); nil: network.allowed_domains; empty: none.
	InjectHosts []string `json:"inject_hosts"`
	// InjectBody lets the proxy put the value into request bodies too
	// (srt-mcp's key; srt always does). Off by default: a value put into
	// a body can be stored by the API and handed back in a form no scan
	// recognises (an archive, wrapped base64, an HTML page); with it on,
	// every tunnel the proxy cannot see into is refused.
	InjectBody bool `json:"inject_body,omitempty"`
}

// CredentialFile is one file entry: the file's whole content is the value.
type CredentialFile struct {
	Path        string   `json:"path"`
	Mode        string   `json:"mode"`
	InjectHosts []string `json:"inject_hosts"` // as CredentialEnv's
	InjectBody  bool     `json:"inject_body,omitempty"`
}

// Names lists every entry's name (files by path), in order.
func (c *Credentials) Names() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, e := range c.EnvVars {
		out = append(out, e.Name)
	}
	for _, f := range c.Files {
		out = append(out, f.Path)
	}
	return out
}

// MaskedNames lists the masked entries' names (files by path): what a
// caller may use through the proxy.
func (c *Credentials) MaskedNames() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, e := range c.EnvVars {
		if e.Mode == CredentialMask {
			out = append(out, e.Name)
		}
	}
	for _, f := range c.Files {
		if f.Mode == CredentialMask {
			out = append(out, f.Path)
		}
	}
	return out
}

// UnmarshalJSON takes the policy's object form, or a call's list of the
// names it uses (sandbox_config "credentials": ["GH_TOKEN"]).
func (c *Credentials) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "[") {
		var names []string
		if err := jsonUnmarshalStrict(b, &names); err != nil {
			return fmt.Errorf("credentials: a list of credential names, such as [\"GH_TOKEN\"]")
		}
		*c = Credentials{Use: names}
		if c.Use == nil {
			c.Use = []string{}
		}
		return nil
	}
	type plain Credentials
	var p plain
	if err := jsonUnmarshalStrict(b, &p); err != nil {
		return err
	}
	*c = Credentials(p)
	return nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateEgress checks the keys of this file's types and the network keys
// beyond name lists.
func (p *Policy) validateEgress() error {
	n := &p.Network
	bad := func(code, field, value, msg string) error {
		return &Error{Code: code, Field: field, Value: value, Message: msg}
	}
	for _, key := range sortedKeys(n.DeniedDomainReasons) {
		found := false
		for _, d := range n.DeniedDomains {
			found = found || d == key
		}
		if !found {
			return bad(CodeInvalidSettings, "network.denied_domain_reasons", key, "names no denied_domains entry (reasons are matched to entries by exact string); add the entry or fix the key")
		}
	}
	if _, err := n.DeniedAddressRanges(); err != nil {
		return err
	}
	switch n.AmbiguousRequestTarget {
	case "", TargetRefuse, TargetAsSpelled, TargetNormalize:
	default:
		return bad(CodeInvalidSettings, "network.ambiguous_request_target", n.AmbiguousRequestTarget, "must be \"refuse\" (the default), \"asSpelled\" or \"normalize\"")
	}
	for i, h := range n.StripResponseHeaders {
		if !validToken(h) {
			return bad(CodeInvalidSettings, fmt.Sprintf("network.strip_response_headers[%d]", i), h, "not a header name")
		}
	}
	if t := n.TLSTerminate; t != nil {
		if (t.CACertPath == "") != (t.CAKeyPath == "") {
			return bad(CodeInvalidSettings, "network.tls_terminate", "", "ca_cert_path and ca_key_path go together: set both, or neither for a CA srt-mcp makes")
		}
		for i, d := range t.ExcludeDomains {
			if _, err := ParsePattern(d, false); err != nil {
				return bad(CodeInvalidDomain, fmt.Sprintf("network.tls_terminate.exclude_domains[%d]", i), d, err.Error())
			}
		}
		if t.MaxTunnels != 0 && (t.MaxTunnels < 1 || t.MaxTunnels > 65536) {
			return bad(CodeInvalidSettings, "network.tls_terminate.max_tunnels", fmt.Sprint(t.MaxTunnels), "must be an integer from 1 to 65536")
		}
		if t.HandshakeTimeoutMs != 0 && (t.HandshakeTimeoutMs < 100 || t.HandshakeTimeoutMs > 600000) {
			return bad(CodeInvalidSettings, "network.tls_terminate.handshake_timeout_ms", fmt.Sprint(t.HandshakeTimeoutMs), "must be an integer from 100 to 600000")
		}
	} else if n.RefuseOpaqueTunnels && len(n.AllowedDomains) > 0 {
		// srt accepts it; every HTTPS request would then fail, so say why.
		return bad(CodeInvalidSettings, "network.refuse_opaque_tunnels", "true", "refuses every tunnel the proxy cannot see into, and without tls_terminate that is every HTTPS connection; set network.tlsTerminate too")
	}
	for _, set := range []struct {
		field string
		rules []RequestRule
	}{{"network.request_rules", n.RequestRules}, {"network.call_request_rules", n.CallRequestRules}} {
		for i, r := range set.rules {
			if err := r.validate(fmt.Sprintf("%s[%d]", set.field, i)); err != nil {
				return err
			}
		}
	}
	c := p.Credentials
	if c == nil {
		return nil
	}
	if c.Use != nil {
		return nil // a call's pick of names, checked against the operator's by Narrow
	}
	seen := map[string]bool{}
	masked := false
	check := func(field, name, mode string, hosts []string) error {
		if seen[name] {
			return bad(CodeInvalidSettings, field, name, "is declared twice")
		}
		seen[name] = true
		switch mode {
		case CredentialDeny:
		case CredentialMask:
			masked = true
		default:
			return bad(CodeInvalidSettings, field+".mode", mode, "must be \"deny\" or \"mask\"")
		}
		for i, h := range hosts {
			if _, err := ParsePattern(h, false); err != nil {
				return bad(CodeInvalidDomain, fmt.Sprintf("%s.inject_hosts[%d]", field, i), h, err.Error())
			}
		}
		return nil
	}
	for i, e := range c.EnvVars {
		field := fmt.Sprintf("credentials.env_vars[%d]", i)
		if !envNameRE.MatchString(e.Name) {
			return bad(CodeInvalidSettings, field+".name", e.Name, "not an environment variable name")
		}
		if err := check(field, e.Name, e.Mode, e.InjectHosts); err != nil {
			return err
		}
	}
	for i, f := range c.Files {
		field := fmt.Sprintf("credentials.files[%d]", i)
		if msg := validatePathEntry(f.Path); msg != "" || IsGlob(f.Path) {
			if msg == "" {
				msg = "a credential file is one path, not a glob"
			}
			return bad(CodeInvalidPath, field+".path", f.Path, msg)
		}
		if err := check(field, f.Path, f.Mode, f.InjectHosts); err != nil {
			return err
		}
	}
	if masked && n.TLSTerminate == nil && !c.AllowPlaintextInject && len(n.AllowedDomains) > 0 {
		return bad(CodeInvalidSettings, "credentials", "", "masked credentials are put back only into requests over verified TLS, which needs network.tlsTerminate; set it (or credentials.allowPlaintextInject to send them in cleartext too)")
	}
	return nil
}

func (r RequestRule) validate(field string) error {
	bad := func(f, v, msg string) error {
		return &Error{Code: CodeInvalidSettings, Field: field + f, Value: v, Message: msg}
	}
	if _, err := ParsePattern(r.Host, false); err != nil {
		return &Error{Code: CodeInvalidDomain, Field: field + ".host", Value: r.Host, Message: err.Error()}
	}
	for i, m := range r.Methods {
		if !validToken(m) || m != strings.ToUpper(m) {
			return bad(fmt.Sprintf(".methods[%d]", i), m, "an HTTP method in upper case, such as GET")
		}
		if m == "TRACE" || m == "TRACK" {
			return bad(fmt.Sprintf(".methods[%d]", i), m, "TRACE and TRACK are always refused (their response echoes the request's headers, injected credentials included)")
		}
	}
	for i, pth := range r.Paths {
		if !strings.HasPrefix(pth, "/") || NormalizeTarget(pth) != pth {
			return bad(fmt.Sprintf(".paths[%d]", i), pth, "a normalised absolute path prefix such as /repos/acme/ (no dot segments, %2e or backslashes)")
		}
	}
	for _, k := range sortedKeys(r.SetHeaders) {
		v := r.SetHeaders[k]
		if !validToken(k) || strings.ContainsAny(v, "\r\n\x00") {
			return bad(".set_headers", k, "a header name and a one-line value")
		}
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Proxy-Authorization":
			return bad(".set_headers", k, "the proxy owns this header; it cannot be set by a rule")
		}
	}
	return nil
}

// Match reports whether the rule allows method on path (already
// normalised); host matching is the caller's.
func (r RequestRule) Match(method, path string) bool {
	if len(r.Methods) > 0 {
		ok := false
		for _, m := range r.Methods {
			ok = ok || m == method
		}
		if !ok {
			return false
		}
	}
	if len(r.Paths) == 0 {
		return true
	}
	for _, p := range r.Paths {
		if path == p || strings.HasPrefix(path, p) && (strings.HasSuffix(p, "/") || path[len(p)] == '/') {
			return true
		}
	}
	return false
}

// NormalizeTarget resolves what upstreams disagree about in a request
// path: a run of leading slashes, "\" read as "/", percent-encoded dots
// and dot segments. A target it changes is ambiguous (srt's definition).
// The query is not part of the input.
func NormalizeTarget(p string) string {
	s := strings.ReplaceAll(p, `\`, "/")
	s = replaceFoldAll(s, "%2e", ".")
	for strings.HasPrefix(s, "//") {
		s = s[1:]
	}
	segs := strings.Split(s, "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// EncodedTraversal reports whether a path holds a dot segment that only
// appears once "%2f" or "%5c" is read as a separator, or a ";parameter"
// is dropped from a segment ("..%2fadmin", "..;/admin"): upstreams that
// read it so (Go's and most routers, IIS, Tomcat) go where no rule
// judged. No mode forwards such a path.
func EncodedTraversal(p string) bool {
	// An upstream that decodes twice reads %252f as %2f, then as "/".
	for i := 0; i < 3 && strings.Contains(strings.ToLower(p), "%25"); i++ {
		p = replaceFoldAll(p, "%25", "%")
	}
	for _, raw := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		low := strings.ToLower(raw)
		if !strings.Contains(low, "%2f") && !strings.Contains(low, "%5c") && !strings.Contains(low, ";") {
			continue // a plain dot segment is NormalizeTarget's
		}
		dec := strings.ReplaceAll(replaceFoldAll(replaceFoldAll(raw, "%2f", "/"), "%5c", "/"), `\`, "/")
		for _, seg := range strings.Split(dec, "/") {
			if i := strings.IndexByte(seg, ';'); i >= 0 {
				seg = seg[:i]
			}
			if seg = replaceFoldAll(seg, "%2e", "."); seg == "." || seg == ".." {
				return true
			}
		}
	}
	return false
}

func replaceFoldAll(s, old, new string) string {
	var b strings.Builder
	for {
		i := strings.Index(strings.ToLower(s), old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(new)
		s = s[i+len(old):]
	}
}

// DeniedAddressRanges parses DeniedResolvedAddresses.
func (n *Network) DeniedAddressRanges() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, r := range n.DeniedResolvedAddresses {
		pfx, err := netip.ParsePrefix(r)
		if err != nil {
			a, perr := netip.ParseAddr(r)
			if perr != nil || a.Zone() != "" {
				return nil, &Error{Code: CodeInvalidDomain, Field: fmt.Sprintf("network.denied_resolved_addresses[%d]", i), Value: r, Message: "not an IP address or CIDR range (unbracketed), such as 10.0.0.0/8 or fc00::/7"}
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, pfx.Masked())
	}
	return out, nil
}

// RulesFor returns the operator's and the call's request rules that name
// host:port. A host with any must have its tunnels terminated.
func (n *Network) RulesFor(host string, port int) (operator, call []RequestRule) {
	h, err := CanonicalHost(host)
	if err != nil {
		return nil, nil
	}
	pick := func(rs []RequestRule) []RequestRule {
		var out []RequestRule
		for _, r := range rs {
			if p, err := ParsePattern(r.Host, false); err == nil && p.Match(h, port) {
				out = append(out, r)
			}
		}
		return out
	}
	return pick(n.RequestRules), pick(n.CallRequestRules)
}

func jsonUnmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
			return false
		}
	}
	return true
}

// mergeEgress adds q's egress keys to out (command-line flags over a
// settings file): lists append, flags and set values of q win.
func mergeEgress(out *Policy, q Policy) {
	n, m := &out.Network, q.Network
	if len(m.DeniedDomainReasons) > 0 {
		r := map[string]string{}
		for k, v := range n.DeniedDomainReasons {
			r[k] = v
		}
		for k, v := range m.DeniedDomainReasons {
			r[k] = v
		}
		n.DeniedDomainReasons = r
	}
	n.DeniedResolvedAddresses = append(append([]string(nil), n.DeniedResolvedAddresses...), m.DeniedResolvedAddresses...)
	n.StripResponseHeaders = append(append([]string(nil), n.StripResponseHeaders...), m.StripResponseHeaders...)
	n.RequestRules = append(append([]RequestRule(nil), n.RequestRules...), m.RequestRules...)
	if m.TLSTerminate != nil {
		n.TLSTerminate = m.TLSTerminate
	}
	n.RefuseOpaqueTunnels = n.RefuseOpaqueTunnels || m.RefuseOpaqueTunnels
	n.RequireHostMatch = n.RequireHostMatch || m.RequireHostMatch
	n.AllowPlaintextHeaderSet = n.AllowPlaintextHeaderSet || m.AllowPlaintextHeaderSet
	if m.AmbiguousRequestTarget != "" {
		n.AmbiguousRequestTarget = m.AmbiguousRequestTarget
	}
	if q.Credentials != nil {
		c := Credentials{}
		if out.Credentials != nil {
			c = *out.Credentials
		}
		c.EnvVars = append(append([]CredentialEnv(nil), c.EnvVars...), q.Credentials.EnvVars...)
		c.Files = append(append([]CredentialFile(nil), c.Files...), q.Credentials.Files...)
		c.AllowPlaintextInject = c.AllowPlaintextInject || q.Credentials.AllowPlaintextInject
		out.Credentials = &c
	}
}

// narrowEgress applies a call's egress keys to out (a copy of the
// ceiling): a call may add restrictions (denied ranges, stripped headers,
// its own request rules, host matching, refusing opaque tunnels and
// ambiguous targets) and pick fewer of the operator's credentials, never
// loosen one. A masked credential the call does not pick is withheld
// (deny), never passed through.
func narrowEgress(out *Policy, call Policy) error {
	n, c := call.Network, out.Network
	over := func(field, value, msg string) error {
		return &Error{Code: CodeExceedsCeiling, Field: field, Value: value, Message: msg}
	}
	switch {
	case n.TLSTerminate != nil:
		return over("network.tls_terminate", "", "TLS termination is set by the operator, not per call; remove the field")
	case len(n.DeniedDomainReasons) > 0:
		return over("network.denied_domain_reasons", "", "deny reasons are set by the operator, not per call; remove the field")
	case len(n.CallRequestRules) > 0:
		return over("network.call_request_rules", "", "a call's rules go in network.request_rules")
	case n.AllowPlaintextHeaderSet && !c.AllowPlaintextHeaderSet:
		return over("network.allow_plaintext_header_set", "true", "the operator keeps header edits off cleartext requests")
	case n.AmbiguousRequestTarget != "" && n.AmbiguousRequestTarget != TargetRefuse && n.AmbiguousRequestTarget != c.AmbiguousRequestTarget:
		return over("network.ambiguous_request_target", n.AmbiguousRequestTarget, "a call may only ask for \"refuse\" (or the operator's own mode)")
	}
	o := &out.Network
	o.DeniedResolvedAddresses = append(append([]string(nil), c.DeniedResolvedAddresses...), n.DeniedResolvedAddresses...)
	o.StripResponseHeaders = append(append([]string(nil), c.StripResponseHeaders...), n.StripResponseHeaders...)
	o.CallRequestRules = append([]RequestRule(nil), n.RequestRules...)
	o.RefuseOpaqueTunnels = c.RefuseOpaqueTunnels || n.RefuseOpaqueTunnels
	o.RequireHostMatch = c.RequireHostMatch || n.RequireHostMatch
	if n.AmbiguousRequestTarget != "" {
		o.AmbiguousRequestTarget = n.AmbiguousRequestTarget
	}
	if o.RefuseOpaqueTunnels && o.TLSTerminate == nil && len(o.AllowedDomains) > 0 {
		return over("network.refuse_opaque_tunnels", "true", "the operator does not terminate TLS, so this would refuse every HTTPS connection")
	}
	if call.Credentials == nil {
		return nil
	}
	if call.Credentials.Use == nil {
		return over("credentials", "", "credentials are declared by the operator; a call lists the names it uses, such as [\"GH_TOKEN\"]")
	}
	ceil := out.Credentials
	use := map[string]bool{}
	for i, name := range call.Credentials.Use {
		known := false
		for _, m := range ceil.MaskedNames() {
			known = known || m == name
		}
		if !known {
			return over(fmt.Sprintf("credentials[%d]", i), name, "is not a credential the operator offers; offered: "+listOrNone(ceil.MaskedNames()))
		}
		use[name] = true
	}
	if ceil == nil {
		return nil
	}
	cc := *ceil
	cc.EnvVars = append([]CredentialEnv(nil), ceil.EnvVars...)
	cc.Files = append([]CredentialFile(nil), ceil.Files...)
	for i := range cc.EnvVars {
		if cc.EnvVars[i].Mode == CredentialMask && !use[cc.EnvVars[i].Name] {
			cc.EnvVars[i].Mode = CredentialDeny
		}
	}
	for i := range cc.Files {
		if cc.Files[i].Mode == CredentialMask && !use[cc.Files[i].Path] {
			cc.Files[i].Mode = CredentialDeny
		}
	}
	out.Credentials = &cc
	return nil
}
