package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ParseSettings reads a settings file in Anthropic srt's format
// (~/.srt-settings.json: network.allowedDomains, filesystem.denyRead, ...) or
// in srt-mcp's own snake_case form (the seed 002 sandbox_config shape, plus
// "limits"). Both spellings may be mixed. Every key is checked: an unknown key,
// a value of the wrong type, or an srt feature srt-mcp does not implement is
// an error naming the key, never silently ignored. srt keys whose value asks
// for nothing beyond srt-mcp's behaviour (for example "allowLocalBinding":
// false) are accepted.
func ParseSettings(data []byte) (Policy, error) {
	var p Policy
	if len(bytes.TrimSpace(data)) == 0 {
		return p, settingsErr("", "the settings file is empty; write a JSON object such as {\"network\":{\"allowedDomains\":[]},\"filesystem\":{}}")
	}
	top, err := decodeObject(data, "")
	if err != nil {
		return p, err
	}
	for _, k := range sortedKeys(top) {
		v := top[k]
		switch k {
		case "network":
			if err := parseNetwork(v, &p.Network); err != nil {
				return p, err
			}
		case "filesystem":
			if err := parseFilesystem(v, &p.Filesystem); err != nil {
				return p, err
			}
		case "limits":
			if err := strictUnmarshal(v, &p.Limits, "limits"); err != nil {
				return p, err
			}
		case "$schema":
			// Editors' schema hint; carries no policy.
		case "allowPty":
			// srt's macOS permission for pseudo-terminals; srt-mcp always
			// allows the PTY a caller asks for.
			if err := wantBool(v, k); err != nil {
				return p, err
			}
		case "mandatoryDenySearchDepth":
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > 10 {
				return p, settingsErr(k, "must be an integer from 1 to 10")
			}
			// srt-mcp searches every level below each writable path:
			// deeper than any value, so each one is honoured.
		case "enableWeakerNestedSandbox", "enableWeakerNetworkIsolation", "allowNestedUserNamespaces", "allowAppleEvents":
			if err := wantFalse(v, k, "srt-mcp never weakens the sandbox"); err != nil {
				return p, err
			}
		case "credentials":
			c, err := parseCredentials(v)
			if err != nil {
				return p, err
			}
			p.Credentials = c
		case "ignoreViolations", "ripgrep", "seccomp", "bwrapPath", "socatPath", "javaAgentJarPath", "git", "windows":
			return p, unsupported(k, "this srt setting is not implemented by srt-mcp; remove it")
		default:
			return p, settingsErr(k, "unknown key; the top level takes \"network\", \"filesystem\" and \"limits\"")
		}
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

func parseNetwork(raw json.RawMessage, n *Network) error {
	obj, err := decodeObject(raw, "network")
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(obj) {
		v, field := obj[k], "network."+k
		switch k {
		case "allowedDomains", "allowed_domains":
			if err := appendList(v, &n.AllowedDomains, field); err != nil {
				return err
			}
		case "deniedDomains", "denied_domains":
			if err := appendList(v, &n.DeniedDomains, field); err != nil {
				return err
			}
		case "allowedIpRanges", "allowed_ip_ranges":
			if err := appendList(v, &n.AllowedIPRanges, field); err != nil {
				return err
			}
		case "hosts":
			if err := strictUnmarshal(v, &n.Hosts, field); err != nil {
				return err
			}
		case "allowLocalBinding", "allowAllUnixSockets", "strictAllowlist":
			// strictAllowlist:true is srt-mcp's only mode; the others must stay off.
			if k == "strictAllowlist" {
				if err := wantBool(v, field); err != nil {
					return err
				}
				continue
			}
			if err := wantFalse(v, field, "sandboxes never reach host sockets or bind host ports"); err != nil {
				return err
			}
		case "allowUnixSockets", "allowMachLookup":
			if !isEmptyJSON(v) {
				return unsupported(field, "this srt setting is not implemented by srt-mcp; remove it")
			}
		case "deniedDomainReasons", "denied_domain_reasons":
			if err := strictUnmarshal(v, &n.DeniedDomainReasons, field); err != nil {
				return err
			}
		case "deniedResolvedAddresses", "denied_resolved_addresses":
			if err := appendList(v, &n.DeniedResolvedAddresses, field); err != nil {
				return err
			}
		case "stripResponseHeaders", "strip_response_headers":
			if err := appendList(v, &n.StripResponseHeaders, field); err != nil {
				return err
			}
		case "refuseOpaqueTunnels", "refuse_opaque_tunnels":
			if err := strictUnmarshal(v, &n.RefuseOpaqueTunnels, field); err != nil {
				return err
			}
		case "requireHostMatch", "require_host_match":
			if err := strictUnmarshal(v, &n.RequireHostMatch, field); err != nil {
				return err
			}
		case "allowPlaintextHeaderSet", "allow_plaintext_header_set":
			if err := strictUnmarshal(v, &n.AllowPlaintextHeaderSet, field); err != nil {
				return err
			}
		case "ambiguousRequestTarget", "ambiguous_request_target":
			if err := strictUnmarshal(v, &n.AmbiguousRequestTarget, field); err != nil {
				return err
			}
		case "requestRules", "request_rules":
			if err := parseRequestRules(v, &n.RequestRules, field); err != nil {
				return err
			}
		case "tlsTerminate", "tls_terminate":
			t, err := parseTLSTerminate(v, field)
			if err != nil {
				return err
			}
			n.TLSTerminate = t
		case "httpProxyPort", "socksProxyPort", "mitmProxy", "parentProxy", "filterRequest":
			return unsupported(field, "this srt setting is not implemented by srt-mcp; remove it")
		default:
			return settingsErr(field, "unknown key; network takes \"allowedDomains\" and \"deniedDomains\"")
		}
	}
	return nil
}

func parseFilesystem(raw json.RawMessage, f *Filesystem) error {
	obj, err := decodeObject(raw, "filesystem")
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(obj) {
		v, field := obj[k], "filesystem."+k
		var dst *[]string
		switch k {
		case "denyRead", "deny_read":
			dst = &f.DenyRead
		case "allowRead", "allow_read":
			dst = &f.AllowRead
		case "allowWrite", "allow_write":
			dst = &f.AllowWrite
		case "denyWrite", "deny_write":
			dst = &f.DenyWrite
		case "allowGitConfig", "allow_git_config":
			if err := strictUnmarshal(v, &f.AllowGitConfig, field); err != nil {
				return err
			}
			continue
		case "disabled":
			if err := wantFalse(v, field, "the filesystem sandbox cannot be turned off"); err != nil {
				return err
			}
			continue
		default:
			return settingsErr(field, "unknown key; filesystem takes \"denyRead\", \"allowRead\", \"allowWrite\", \"denyWrite\" and \"allowGitConfig\"")
		}
		paths, err := parsePathList(v, field)
		if err != nil {
			return err
		}
		*dst = append(*dst, paths...)
	}
	return nil
}

// parseTLSTerminate reads srt's network.tlsTerminate ({} turns it on with
// every default).
func parseTLSTerminate(raw json.RawMessage, field string) (*TLSTerminate, error) {
	obj, err := decodeObject(raw, field)
	if err != nil {
		return nil, err
	}
	t := &TLSTerminate{}
	for _, k := range sortedKeys(obj) {
		v, f := obj[k], field+"."+k
		switch k {
		case "caCertPath", "ca_cert_path":
			err = strictUnmarshal(v, &t.CACertPath, f)
		case "caKeyPath", "ca_key_path":
			err = strictUnmarshal(v, &t.CAKeyPath, f)
		case "excludeDomains", "exclude_domains":
			err = appendList(v, &t.ExcludeDomains, f)
		case "extraCaCertPaths", "extra_ca_cert_paths":
			err = appendList(v, &t.ExtraCACertPaths, f)
		case "maxTunnels", "max_tunnels":
			if err = strictUnmarshal(v, &t.MaxTunnels, f); err == nil && t.MaxTunnels == 0 {
				err = settingsErr(f, "must be an integer from 1 to 65536")
			}
		case "handshakeTimeoutMs", "handshake_timeout_ms":
			if err = strictUnmarshal(v, &t.HandshakeTimeoutMs, f); err == nil && t.HandshakeTimeoutMs == 0 {
				err = settingsErr(f, "must be an integer from 100 to 600000")
			}
		default:
			err = settingsErr(f, "unknown key; tlsTerminate takes \"caCertPath\", \"caKeyPath\", \"excludeDomains\", \"extraCaCertPaths\", \"maxTunnels\" and \"handshakeTimeoutMs\"")
		}
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// parseRequestRules reads srt-mcp's network.requestRules: a list of
// {"host", "methods", "paths", "setHeaders"}.
func parseRequestRules(raw json.RawMessage, dst *[]RequestRule, field string) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return settingsErr(field, "must be a list of rules such as {\"host\": \"api.github.com\", \"methods\": [\"GET\"], \"paths\": [\"/repos/acme/\"]}")
	}
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		obj, err := decodeObject(it, f)
		if err != nil {
			return err
		}
		var r RequestRule
		for _, k := range sortedKeys(obj) {
			v, kf := obj[k], f+"."+k
			switch k {
			case "host":
				err = strictUnmarshal(v, &r.Host, kf)
			case "methods":
				err = appendList(v, &r.Methods, kf)
			case "paths":
				err = appendList(v, &r.Paths, kf)
			case "setHeaders", "set_headers":
				err = strictUnmarshal(v, &r.SetHeaders, kf)
			default:
				err = settingsErr(kf, "unknown key; a request rule takes \"host\", \"methods\", \"paths\" and \"setHeaders\"")
			}
			if err != nil {
				return err
			}
		}
		if r.Host == "" {
			return settingsErr(f+".host", "every rule names its host")
		}
		*dst = append(*dst, r)
	}
	return nil
}

// parseCredentials reads srt's credentials section. Keys srt-mcp does not
// implement (structured extraction, JWT claims, AWS re-signing) are errors
// naming them: a secret the operator thinks is masked must never be passed
// through as is.
func parseCredentials(raw json.RawMessage) (*Credentials, error) {
	obj, err := decodeObject(raw, "credentials")
	if err != nil {
		return nil, err
	}
	c := &Credentials{}
	for _, k := range sortedKeys(obj) {
		v, f := obj[k], "credentials."+k
		switch k {
		case "envVars", "env_vars", "files":
			var items []json.RawMessage
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, settingsErr(f, "must be a list of entries such as {\"name\": \"GH_TOKEN\", \"mode\": \"mask\"}")
			}
			for i, it := range items {
				ef := fmt.Sprintf("%s[%d]", f, i)
				eobj, err := decodeObject(it, ef)
				if err != nil {
					return nil, err
				}
				var name, mode string
				var hosts []string
				var body bool
				for _, ek := range sortedKeys(eobj) {
					ev, kf := eobj[ek], ef+"."+ek
					switch {
					case ek == "name" && k != "files", ek == "path" && k == "files":
						err = strictUnmarshal(ev, &name, kf)
					case ek == "mode":
						err = strictUnmarshal(ev, &mode, kf)
					case ek == "injectHosts" || ek == "inject_hosts":
						// An empty list is "no host", not the default
						// (every allowed domain); null is the default.
						if string(bytes.TrimSpace(ev)) != "null" {
							hosts = []string{}
						}
						err = appendList(ev, &hosts, kf)
					case ek == "injectBody" || ek == "inject_body":
						err = strictUnmarshal(ev, &body, kf)
					case ek == "extract" || ek == "onExtractNoMatch" || ek == "decode" || ek == "maskClaims" || ek == "maskDuplicates":
						err = unsupported(kf, "structured masking (extract, decode, maskClaims) is not implemented by srt-mcp: the whole value is masked; remove the key")
					default:
						want := "\"name\""
						if k == "files" {
							want = "\"path\""
						}
						err = settingsErr(kf, "unknown key; an entry takes "+want+", \"mode\", \"injectHosts\" and \"injectBody\"")
					}
					if err != nil {
						return nil, err
					}
				}
				if name == "" {
					return nil, settingsErr(ef, "every entry names its source (\"name\" of a variable, \"path\" of a file)")
				}
				if k == "files" {
					c.Files = append(c.Files, CredentialFile{Path: name, Mode: mode, InjectHosts: hosts, InjectBody: body})
				} else {
					c.EnvVars = append(c.EnvVars, CredentialEnv{Name: name, Mode: mode, InjectHosts: hosts, InjectBody: body})
				}
			}
		case "allowPlaintextInject", "allow_plaintext_inject":
			if err := strictUnmarshal(v, &c.AllowPlaintextInject, f); err != nil {
				return nil, err
			}
		case "awsPairs", "sigv4":
			return nil, unsupported(f, "AWS credential re-signing is not implemented by srt-mcp; remove the key (mask the variables as whole values, or keep AWS keys out of the sandbox with mode \"deny\")")
		default:
			return nil, settingsErr(f, "unknown key; credentials takes \"envVars\", \"files\" and \"allowPlaintextInject\"")
		}
	}
	return c, nil
}

// parsePathList accepts srt's entries: a string, or {"path": "...",
// "literal": true} for a path whose glob characters are meant literally.
func parsePathList(raw json.RawMessage, field string) ([]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, settingsErr(field, "must be a list of paths")
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		var s string
		if err := json.Unmarshal(it, &s); err == nil {
			out = append(out, s)
			continue
		}
		var obj struct {
			Path    *string `json:"path"`
			Literal bool    `json:"literal"`
		}
		dec := json.NewDecoder(bytes.NewReader(it))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil || obj.Path == nil {
			return nil, settingsErr(f, "must be a path string or {\"path\": \"...\", \"literal\": true}")
		}
		if obj.Literal {
			out = append(out, EscapeGlob(*obj.Path))
		} else {
			out = append(out, *obj.Path)
		}
	}
	return out, nil
}

// EscapeGlob quotes glob metacharacters so the path matches only itself.
func EscapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func decodeObject(raw json.RawMessage, field string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&obj); err != nil {
		var se *json.SyntaxError
		if asSyntax(err, &se) {
			line, col := lineCol(raw, se.Offset)
			return nil, settingsErr(field, fmt.Sprintf("malformed JSON at line %d, column %d: %v", line, col, se))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			line, _ := lineCol(raw, int64(len(raw))+1)
			return nil, settingsErr(field, fmt.Sprintf("malformed JSON: the file ends early at line %d; close every { and [", line))
		}
		if field == "" {
			return nil, settingsErr("", "the settings file must be a JSON object: "+err.Error())
		}
		return nil, settingsErr(field, "must be a JSON object")
	}
	if obj == nil {
		return nil, settingsErr(field, "must be a JSON object, not null")
	}
	if dec.More() {
		return nil, settingsErr(field, "unexpected data after the JSON object")
	}
	return obj, nil
}

func asSyntax(err error, se **json.SyntaxError) bool {
	s, ok := err.(*json.SyntaxError)
	if ok {
		*se = s
	}
	return ok
}

func lineCol(b []byte, off int64) (int, int) {
	line, col := 1, 1
	// The error is at the byte before Offset (Offset bytes were read).
	for i := int64(0); i < off-1 && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func strictUnmarshal(raw json.RawMessage, v any, field string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "json: ")
		return settingsErr(field, "invalid value: "+msg)
	}
	return nil
}

// appendList adds a JSON list of strings to dst: srt's camelCase and
// srt-mcp's snake_case spellings of one key both count.
func appendList(raw json.RawMessage, dst *[]string, field string) error {
	var items []string
	if err := strictUnmarshal(raw, &items, field); err != nil {
		return err
	}
	*dst = append(*dst, items...)
	return nil
}

func wantBool(v json.RawMessage, field string) error {
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return settingsErr(field, "must be true or false")
	}
	return nil
}

func wantFalse(v json.RawMessage, field, why string) error {
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return settingsErr(field, "must be true or false")
	}
	if b {
		return unsupported(field, why+"; remove the key or set it to false")
	}
	return nil
}

func isEmptyJSON(v json.RawMessage) bool {
	s := string(bytes.TrimSpace(v))
	return s == "[]" || s == "{}" || s == "null" || s == "false"
}

func settingsErr(field, msg string) error {
	return &Error{Code: CodeInvalidSettings, Field: field, Message: msg}
}

func unsupported(field, msg string) error {
	return &Error{Code: CodeUnsupported, Field: field, Message: msg}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Merge returns p with q's entries appended to every list (q's flags win
// when set, q's non-zero limits replace p's). It is how command-line flags
// add to a settings file.
func Merge(p, q Policy) Policy {
	out := p
	out.Filesystem.DenyRead = append(append([]string{}, p.Filesystem.DenyRead...), q.Filesystem.DenyRead...)
	out.Filesystem.AllowRead = append(append([]string{}, p.Filesystem.AllowRead...), q.Filesystem.AllowRead...)
	out.Filesystem.AllowWrite = append(append([]string{}, p.Filesystem.AllowWrite...), q.Filesystem.AllowWrite...)
	out.Filesystem.DenyWrite = append(append([]string{}, p.Filesystem.DenyWrite...), q.Filesystem.DenyWrite...)
	out.Filesystem.AllowGitConfig = p.Filesystem.AllowGitConfig || q.Filesystem.AllowGitConfig
	out.Network.AllowedDomains = append(append([]string{}, p.Network.AllowedDomains...), q.Network.AllowedDomains...)
	out.Network.DeniedDomains = append(append([]string{}, p.Network.DeniedDomains...), q.Network.DeniedDomains...)
	out.Network.AllowedIPRanges = append(append([]string{}, p.Network.AllowedIPRanges...), q.Network.AllowedIPRanges...)
	mergeEgress(&out, q)
	if len(p.Network.Hosts)+len(q.Network.Hosts) > 0 {
		out.Network.Hosts = map[string]string{}
		for k, v := range p.Network.Hosts {
			out.Network.Hosts[k] = v
		}
		for k, v := range q.Network.Hosts {
			out.Network.Hosts[k] = v
		}
	}
	l, m := &out.Limits, q.Limits
	if m.Timeout != 0 {
		l.Timeout = m.Timeout
	}
	if m.MaxOutputBytes != 0 {
		l.MaxOutputBytes = m.MaxOutputBytes
	}
	if m.MaxProcesses != 0 {
		l.MaxProcesses = m.MaxProcesses
	}
	if m.MaxMemoryBytes != 0 {
		l.MaxMemoryBytes = m.MaxMemoryBytes
	}
	if m.MaxFileSizeBytes != 0 {
		l.MaxFileSizeBytes = m.MaxFileSizeBytes
	}
	if m.MaxOpenFiles != 0 {
		l.MaxOpenFiles = m.MaxOpenFiles
	}
	if m.TmpBytes != 0 {
		l.TmpBytes = m.TmpBytes
	}
	return out
}
