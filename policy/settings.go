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
		case "ignoreViolations", "ripgrep", "seccomp", "bwrapPath", "socatPath", "javaAgentJarPath", "git", "windows", "credentials":
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
		case "allowUnixSockets", "allowMachLookup", "deniedDomainReasons", "deniedResolvedAddresses":
			if !isEmptyJSON(v) {
				return unsupported(field, "this srt setting is not implemented by srt-mcp; remove it")
			}
		case "httpProxyPort", "socksProxyPort", "mitmProxy", "parentProxy", "filterRequest",
			"allowPlaintextHeaderSet", "stripResponseHeaders", "refuseOpaqueTunnels",
			"requireHostMatch", "ambiguousRequestTarget", "tlsTerminate":
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

func sortedKeys(m map[string]json.RawMessage) []string {
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
