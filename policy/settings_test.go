package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// settingsCases is the expected outcome of every file in
// testdata/settings/. A valid file has want (compared with reflect.DeepEqual
// after nil and empty lists are made the same) or check; an invalid one has
// the error's Code, its Field exactly, and words its message must contain.
var settingsCases = map[string]struct {
	code    string // "" = valid
	field   string
	value   string // the *Error's Value, when set
	mention []string
	want    *Policy
	check   func(t *testing.T, p Policy)
}{
	"srt-camel.json": {want: &Policy{
		Network: Network{
			AllowedDomains: []string{"pypi.org", "*.github.com", "registry.npmjs.org:443"},
			DeniedDomains:  []string{"evil.github.com"},
		},
		Filesystem: Filesystem{
			DenyRead:       []string{"~/.ssh", "~/.aws"},
			AllowRead:      []string{"~/.ssh/known_hosts"},
			AllowWrite:     []string{".", "/tmp/build"},
			DenyWrite:      []string{".env", "**/*.pem"},
			AllowGitConfig: true,
		},
	}},
	"snake.json": {want: &Policy{
		Network: Network{
			AllowedDomains:  []string{"api.example.com:443", "127.0.0.1:8080"},
			DeniedDomains:   []string{"*"},
			AllowedIPRanges: []string{"10.0.0.0/8", "192.168.1.7"},
			Hosts:           map[string]string{"db.internal": "10.1.2.3"},
		},
		Filesystem: Filesystem{
			DenyRead:   []string{"/secret"},
			AllowRead:  []string{"/data"},
			AllowWrite: []string{"out"},
			DenyWrite:  []string{"out/keep"},
		},
		Limits: Limits{Timeout: Duration(90 * time.Second), MaxProcesses: 64},
	}},
	// Both spellings of a key add to one list, in key order.
	"mixed.json": {want: &Policy{
		Network: Network{
			AllowedDomains:  []string{"a.com", "b.com"},
			DeniedDomains:   []string{"evil.a.com", "c.a.com"},
			AllowedIPRanges: []string{"10.0.0.0/8", "192.168.0.0/16"},
		},
		Filesystem: Filesystem{
			AllowRead:      []string{"/r1", "/r2"},
			DenyRead:       []string{"/d2", "/d1"},
			AllowGitConfig: true,
		},
	}},
	"literal.json": {want: &Policy{Filesystem: Filesystem{DenyWrite: []string{
		`a\[1\]\*.txt`, `\{x,y\}\?\\z`, "logs/*.log", "plain", "also-plain",
	}}}},
	"limits.json": {want: &Policy{Limits: Limits{
		Timeout: Duration(30 * time.Second), MaxOutputBytes: 1 << 20, MaxProcesses: MinProcesses,
		MaxMemoryBytes: MinMemoryBytes, MaxOpenFiles: 16, TmpBytes: MinTmpBytes,
	}}},
	// srt keys that ask for nothing beyond srt-mcp's behaviour are accepted.
	"srt-false-flags.json": {want: &Policy{}},
	"empty-object.json":    {want: &Policy{}},

	"malformed.json":            {code: CodeInvalidSettings, field: "", mention: []string{"malformed JSON", "line 3, column 32", "']'"}},
	"malformed-first-line.json": {code: CodeInvalidSettings, field: "", mention: []string{"malformed JSON", "line 1, column 2"}},
	// A file cut short is malformed JSON too, and the user needs to know where.
	"truncated.json":             {code: CodeInvalidSettings, field: "", mention: []string{"malformed JSON", "line 3"}},
	"empty.json":                 {code: CodeInvalidSettings, field: "", mention: []string{"empty"}},
	"blank.json":                 {code: CodeInvalidSettings, field: "", mention: []string{"empty"}},
	"array.json":                 {code: CodeInvalidSettings, field: "", mention: []string{"JSON object"}},
	"null.json":                  {code: CodeInvalidSettings, field: "", mention: []string{"JSON object", "null"}},
	"string.json":                {code: CodeInvalidSettings, field: "", mention: []string{"JSON object"}},
	"trailing-data.json":         {code: CodeInvalidSettings, field: "", mention: []string{"unexpected data"}},
	"unknown-top.json":           {code: CodeInvalidSettings, field: "netwrok", mention: []string{"unknown key"}},
	"unknown-network.json":       {code: CodeInvalidSettings, field: "network.allowedDomain", mention: []string{"unknown key", "allowedDomains"}},
	"unknown-filesystem.json":    {code: CodeInvalidSettings, field: "filesystem.denyread", mention: []string{"unknown key", "denyRead"}},
	"network-array.json":         {code: CodeInvalidSettings, field: "network", mention: []string{"JSON object"}},
	"network-null.json":          {code: CodeInvalidSettings, field: "network", mention: []string{"null"}},
	"wrong-type-denyread.json":   {code: CodeInvalidSettings, field: "filesystem.denyRead", mention: []string{"list"}},
	"wrong-type-domains.json":    {code: CodeInvalidSettings, field: "network.allowedDomains", mention: []string{"invalid value"}},
	"wrong-type-gitconfig.json":  {code: CodeInvalidSettings, field: "filesystem.allowGitConfig", mention: []string{"invalid value"}},
	"literal-unknown-key.json":   {code: CodeInvalidSettings, field: "filesystem.denyWrite[0]", mention: []string{"literal"}},
	"literal-no-path.json":       {code: CodeInvalidSettings, field: "filesystem.denyWrite[0]"},
	"path-number.json":           {code: CodeInvalidSettings, field: "filesystem.denyWrite[0]"},
	"weaker-nested-true.json":    {code: CodeUnsupported, field: "enableWeakerNestedSandbox", mention: []string{"set it to false"}},
	"weaker-nested-string.json":  {code: CodeInvalidSettings, field: "enableWeakerNestedSandbox", mention: []string{"true or false"}},
	"local-binding-true.json":    {code: CodeUnsupported, field: "network.allowLocalBinding"},
	"all-unix-sockets-true.json": {code: CodeUnsupported, field: "network.allowAllUnixSockets"},
	"unix-sockets-listed.json":   {code: CodeUnsupported, field: "network.allowUnixSockets", mention: []string{"not implemented"}},
	"proxy-port.json":            {code: CodeUnsupported, field: "network.httpProxyPort"},
	"filesystem-disabled.json":   {code: CodeUnsupported, field: "filesystem.disabled", mention: []string{"cannot be turned off"}},
	"credentials.json": {want: &Policy{
		Network: Network{AllowedDomains: []string{"api.github.com", "github.com"}, TLSTerminate: &TLSTerminate{}},
		Credentials: &Credentials{
			EnvVars: []CredentialEnv{{Name: "GH_TOKEN", Mode: "mask", InjectHosts: []string{"api.github.com"}, InjectBody: true}, {Name: "AWS_SECRET_ACCESS_KEY", Mode: "deny"}},
			Files:   []CredentialFile{{Path: "~/.config/token", Mode: "mask"}},
		},
	}},
	"credentials-extract.json":        {code: CodeUnsupported, field: "credentials.envVars[0].extract", mention: []string{"whole value"}},
	"credentials-aws.json":            {code: CodeUnsupported, field: "credentials.awsPairs", mention: []string{"not implemented"}},
	"credentials-mask-cleartext.json": {code: CodeInvalidSettings, field: "credentials", mention: []string{"tlsTerminate", "allowPlaintextInject"}},
	"credentials-bad-mode.json":       {code: CodeInvalidSettings, field: "credentials.env_vars[0].mode", value: "hide"},
	"credentials-bad-name.json":       {code: CodeInvalidSettings, field: "credentials.env_vars[0].name", value: "MY-TOKEN"},
	"tls-terminate-half-ca.json":      {code: CodeInvalidSettings, field: "network.tls_terminate", mention: []string{"go together"}},
	"tls-terminate-max-tunnels.json":  {code: CodeInvalidSettings, field: "network.tls_terminate.max_tunnels", mention: []string{"1 to 65536"}},
	"tls-terminate-unknown.json":      {code: CodeInvalidSettings, field: "network.tlsTerminate.mode", mention: []string{"maxTunnels"}},
	"deny-reason-orphan.json":         {code: CodeInvalidSettings, field: "network.denied_domain_reasons", value: "b.example"},
	"denied-resolved-bad.json":        {code: CodeInvalidDomain, field: "network.denied_resolved_addresses[0]", value: "[::1]", mention: []string{"unbracketed"}},
	"ambiguous-bad.json":              {code: CodeInvalidSettings, field: "network.ambiguous_request_target", value: "lenient"},
	"request-rule-trace.json":         {code: CodeInvalidSettings, field: "network.request_rules[0].methods[0]", value: "TRACE"},
	"request-rule-dotdot.json":        {code: CodeInvalidSettings, field: "network.request_rules[0].paths[0]", value: "/a/../admin"},
	"refuse-opaque-no-tls.json":       {code: CodeInvalidSettings, field: "network.refuse_opaque_tunnels", mention: []string{"tlsTerminate"}},
	"tls-terminate.json": {want: &Policy{Network: Network{
		AllowedDomains:          []string{"*.example.com", "internal-mtls.example.net"},
		DeniedDomains:           []string{"github.com:22", "evil.example.com"},
		DeniedDomainReasons:     map[string]string{"github.com:22": "SSH pushes to GitHub are blocked; use an https:// remote"},
		DeniedResolvedAddresses: []string{"10.0.0.0/8", "fc00::/7", "192.168.1.1"},
		TLSTerminate: &TLSTerminate{ExcludeDomains: []string{"internal-mtls.example.net"}, ExtraCACertPaths: []string{"/etc/internal-mtls-roots.pem"},
			MaxTunnels: 64, HandshakeTimeoutMs: 5000},
		RequireHostMatch:       true,
		AmbiguousRequestTarget: "refuse",
		StripResponseHeaders:   []string{"set-cookie"},
		RequestRules: []RequestRule{
			{Host: "api.example.com", Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/acme/"}},
			{Host: "uploads.example.com", Methods: []string{"PUT"}, SetHeaders: map[string]string{"X-Org": "acme"}},
		},
	}}},
	"ripgrep.json":               {code: CodeUnsupported, field: "ripgrep"},
	"search-depth-5.json":        {}, // srt-mcp searches every level: deeper than any value
	"search-depth-11.json":       {code: CodeInvalidSettings, field: "mandatoryDenySearchDepth", mention: []string{"1 to 10"}},
	"invalid-domain.json":        {code: CodeInvalidDomain, field: "network.allowed_domains[1]", value: "*.com", mention: []string{"top-level domain"}},
	"invalid-denied-domain.json": {code: CodeInvalidDomain, field: "network.denied_domains[0]", value: "https://x.com/", mention: []string{"not a URL"}},
	"invalid-ip-range.json":      {code: CodeInvalidDomain, field: "network.allowed_ip_ranges[0]", value: "10.0.0.0/33"},
	"invalid-host-pin.json":      {code: CodeInvalidDomain, field: "network.hosts.db.internal", value: "not-an-ip"},
	"invalid-path-tilde.json":    {code: CodeInvalidPath, field: "filesystem.allow_read[1]", value: "~bob/x", mention: []string{"~user"}},
	"invalid-glob.json":          {code: CodeInvalidPath, field: "filesystem.deny_read[0]", value: "a[b", mention: []string{"glob"}},
	"limit-too-small.json":       {code: CodeInvalidLimit, field: "limits.max_memory_bytes", value: "1000", mention: []string{"32 MiB"}},
	"limit-bad-duration.json":    {code: CodeInvalidSettings, field: "limits", mention: []string{"duration"}},
	"limit-unknown-key.json":     {code: CodeInvalidSettings, field: "limits", mention: []string{"max_cpus"}},
	// limits is srt-mcp's own block: snake_case only.
	"limit-camel-key.json": {code: CodeInvalidSettings, field: "limits", mention: []string{"maxProcesses"}},
}

// normalize makes nil and empty lists and maps the same for comparison.
func normalize(p Policy) Policy {
	fix := func(s *[]string) {
		if len(*s) == 0 {
			*s = nil
		}
	}
	fix(&p.Filesystem.DenyRead)
	fix(&p.Filesystem.AllowRead)
	fix(&p.Filesystem.AllowWrite)
	fix(&p.Filesystem.DenyWrite)
	fix(&p.Network.AllowedDomains)
	fix(&p.Network.DeniedDomains)
	fix(&p.Network.AllowedIPRanges)
	if len(p.Network.Hosts) == 0 {
		p.Network.Hosts = nil
	}
	if len(p.Network.DeniedDomainReasons) == 0 {
		p.Network.DeniedDomainReasons = nil
	}
	fix(&p.Network.DeniedResolvedAddresses)
	fix(&p.Network.StripResponseHeaders)
	return p
}

func TestSettingsFromTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/settings/*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		tc, ok := settingsCases[name]
		if !ok {
			t.Errorf("%s has no expected outcome in settingsCases", f)
			continue
		}
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParseSettings(data)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.want != nil && !reflect.DeepEqual(normalize(p), normalize(*tc.want)) {
					t.Fatalf("got  %+v\nwant %+v", p, *tc.want)
				}
				if tc.check != nil {
					tc.check(t, p)
				}
				if err := p.Validate(); err != nil {
					t.Fatalf("a parsed policy must validate: %v", err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("want a *policy.Error with code %s, got %T %v", tc.code, err, err)
			}
			if pe.Code != tc.code || pe.Field != tc.field {
				t.Fatalf("got code=%s field=%q (%v), want code=%s field=%q", pe.Code, pe.Field, err, tc.code, tc.field)
			}
			if tc.value != "" && pe.Value != tc.value {
				t.Errorf("Value = %q, want %q", pe.Value, tc.value)
			}
			if tc.field != "" && !strings.HasPrefix(err.Error(), tc.field) {
				t.Errorf("error %q should start with the key %q", err, tc.field)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q should mention %q", err, m)
				}
			}
		})
	}
	var missing []string
	for name := range settingsCases {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("settingsCases lists files that are not in testdata/settings: %v", missing)
	}
}

// A literal entry's escaped form is a glob that matches exactly the path.
func TestLiteralEntriesMatchOnlyThemselves(t *testing.T) {
	for _, s := range []string{"a[1]*.txt", "{x,y}?\\z", "plain", "**", "[!a]", "a{b"} {
		esc := EscapeGlob(s)
		if !doublestar.ValidatePathPattern(esc) {
			t.Errorf("EscapeGlob(%q) = %q is not a valid pattern", s, esc)
			continue
		}
		if ok, err := doublestar.PathMatch(esc, s); err != nil || !ok {
			t.Errorf("EscapeGlob(%q) = %q does not match the path itself (%v)", s, esc, err)
		}
		for _, other := range []string{"a1x.txt", "x?\\z", "y", "ab", "b"} {
			if other == s {
				continue
			}
			if ok, _ := doublestar.PathMatch(esc, other); ok {
				t.Errorf("EscapeGlob(%q) = %q also matches %q", s, esc, other)
			}
		}
		if err := (&Policy{Filesystem: Filesystem{DenyRead: []string{esc}}}).Validate(); err != nil {
			t.Errorf("escaped literal %q does not validate: %v", esc, err)
		}
	}
}

// What srt-mcp writes (snake_case JSON of a Policy) reads back unchanged.
func TestSettingsRoundTrip(t *testing.T) {
	for name, tc := range settingsCases {
		if tc.want == nil {
			continue
		}
		b, err := json.Marshal(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseSettings(b)
		if err != nil {
			t.Fatalf("%s: %s does not read back: %v", name, b, err)
		}
		if !reflect.DeepEqual(normalize(p), normalize(*tc.want)) {
			t.Fatalf("%s: %s read back as %+v", name, b, p)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	ok := []Limits{
		{},
		{Timeout: Duration(time.Nanosecond), MaxOutputBytes: 1, MaxFileSizeBytes: 1},
		{MaxProcesses: MinProcesses, MaxMemoryBytes: MinMemoryBytes, MaxOpenFiles: 16, TmpBytes: MinTmpBytes},
		{MaxProcesses: 1 << 20, MaxMemoryBytes: 1 << 40, MaxOpenFiles: 1 << 20, TmpBytes: 1 << 40},
	}
	for _, l := range ok {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	for _, tc := range []struct {
		l     Limits
		field string
		value string
	}{
		{Limits{Timeout: Duration(-time.Second)}, "limits.timeout", "-1s"},
		{Limits{MaxOutputBytes: -1}, "limits.max_output_bytes", "-1"},
		{Limits{MaxProcesses: -1}, "limits.max_processes", "-1"},
		{Limits{MaxProcesses: MinProcesses - 1}, "limits.max_processes", "3"},
		{Limits{MaxMemoryBytes: -1}, "limits.max_memory_bytes", "-1"},
		{Limits{MaxMemoryBytes: MinMemoryBytes - 1}, "limits.max_memory_bytes", "33554431"},
		{Limits{MaxFileSizeBytes: -1}, "limits.max_file_size_bytes", "-1"},
		{Limits{MaxOpenFiles: -1}, "limits.max_open_files", "-1"},
		{Limits{MaxOpenFiles: 15}, "limits.max_open_files", "15"},
		{Limits{TmpBytes: -1}, "limits.tmp_bytes", "-1"},
		{Limits{TmpBytes: MinTmpBytes - 1}, "limits.tmp_bytes", "1048575"},
	} {
		err := tc.l.Validate()
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeInvalidLimit || pe.Field != tc.field || pe.Value != tc.value {
			t.Errorf("%+v: got %#v, want %s on %s = %s", tc.l, err, CodeInvalidLimit, tc.field, tc.value)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	ok := []Policy{
		{},
		{Filesystem: Filesystem{DenyRead: []string{"~", "~/.ssh", "/abs", "rel/x", "**/*.pem", "{a,b}/c", `a\[1\]`}}},
		{Network: Network{AllowedDomains: []string{"x.com", "*.x.com:443", "[::1]"}, DeniedDomains: []string{"*", "*.com"}}},
		{Network: Network{AllowedIPRanges: []string{"127.0.0.0/8", "::1", "10.1.2.3", "fd00::/8"}, Hosts: map[string]string{"a.b": "1.2.3.4", "Db.Local.": "::1"}}},
	}
	for i, p := range ok {
		if err := p.Validate(); err != nil {
			t.Errorf("ok[%d]: %v", i, err)
		}
	}
	for _, tc := range []struct {
		p     Policy
		code  string
		field string
	}{
		{Policy{Filesystem: Filesystem{AllowWrite: []string{"ok", ""}}}, CodeInvalidPath, "filesystem.allow_write[1]"},
		{Policy{Filesystem: Filesystem{DenyWrite: []string{"a\x00b"}}}, CodeInvalidPath, "filesystem.deny_write[0]"},
		{Policy{Filesystem: Filesystem{AllowRead: []string{"~root/.ssh"}}}, CodeInvalidPath, "filesystem.allow_read[0]"},
		{Policy{Filesystem: Filesystem{DenyRead: []string{"x", "{a,b"}}}, CodeInvalidPath, "filesystem.deny_read[1]"},
		{Policy{Network: Network{AllowedDomains: []string{"*"}}}, CodeInvalidDomain, "network.allowed_domains[0]"},
		{Policy{Network: Network{DeniedDomains: []string{"ok.com", "a..b"}}}, CodeInvalidDomain, "network.denied_domains[1]"},
		{Policy{Network: Network{AllowedIPRanges: []string{"10.0.0.0/8", "x"}}}, CodeInvalidDomain, "network.allowed_ip_ranges[1]"},
		{Policy{Network: Network{Hosts: map[string]string{"a..b": "1.2.3.4"}}}, CodeInvalidDomain, "network.hosts"},
		{Policy{Network: Network{Hosts: map[string]string{"a.b": "nope"}}}, CodeInvalidDomain, "network.hosts.a.b"},
		{Policy{Limits: Limits{MaxProcesses: 2}}, CodeInvalidLimit, "limits.max_processes"},
	} {
		err := tc.p.Validate()
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != tc.code || pe.Field != tc.field {
			t.Errorf("%+v: got %v, want %s on %s", tc.p, err, tc.code, tc.field)
		}
	}
}

func TestNetworkRanges(t *testing.T) {
	n := Network{AllowedIPRanges: []string{"10.1.2.3/8", "192.168.1.7", "::1", "0x7f.1"}}
	got, err := n.Ranges()
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	if want := "10.0.0.0/8 192.168.1.7/32 ::1/128 127.0.0.1/32"; strings.Join(s, " ") != want {
		t.Fatalf("Ranges() = %v, want %s (masked; single addresses as /32 and /128)", s, want)
	}
}

func TestErrorString(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Field: "network.allowed_domains[1]", Value: "*.com", Message: "bad"}, `network.allowed_domains[1] "*.com": bad`},
		{Error{Field: "limits", Message: "bad"}, "limits: bad"},
		{Error{Message: "the settings file is empty"}, "the settings file is empty"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`"30s"`: 30 * time.Second, `30`: 30 * time.Second, `"1m30s"`: 90 * time.Second, `1.5`: 1500 * time.Millisecond,
		`0`: 0, `"0s"`: 0, `" 2s"`: -1, `1e3`: 1000 * time.Second, `"250ms"`: 250 * time.Millisecond,
	} {
		var d Duration
		err := json.Unmarshal([]byte(in), &d)
		if want < 0 {
			if err == nil {
				t.Errorf("%s: want an error, got %v", in, d.Std())
			}
			continue
		}
		if err != nil || d.Std() != want {
			t.Errorf("%s: got %v, %v; want %v", in, d.Std(), err, want)
		}
	}
	for _, bad := range []string{`"soon"`, `"30"`, `true`, `"1h"x`, `[]`, `{}`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s: want an error, got %v", bad, d.Std())
		}
	}
	for _, d := range []time.Duration{0, time.Nanosecond, 30 * time.Second, 90 * time.Second, 36 * time.Hour} {
		b, err := json.Marshal(Duration(d))
		if err != nil || string(b) != `"`+d.String()+`"` {
			t.Errorf("Marshal(%v) = %s, %v", d, b, err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back.Std() != d {
			t.Errorf("%s read back as %v, %v", b, back.Std(), err)
		}
	}
	// Inside a Limits, through the strict decoder.
	var l Limits
	if err := json.Unmarshal([]byte(`{"timeout":45}`), &l); err != nil || l.Timeout.Std() != 45*time.Second {
		t.Fatalf("%+v %v", l, err)
	}
}

// A number of seconds too large for a time.Duration must not wrap around
// to a negative (or arbitrary) value: it is an error, or at least positive.
func TestDurationJSONHuge(t *testing.T) {
	for _, in := range []string{`1e10`, `1e300`, `9300000000`} {
		var d Duration
		err := json.Unmarshal([]byte(in), &d)
		if err == nil && d <= 0 {
			t.Errorf("Duration from %s seconds = %v (%d): an overflow must be an error, not a non-positive duration", in, d.Std(), int64(d))
		}
	}
}

func TestMerge(t *testing.T) {
	p := Policy{
		Filesystem: Filesystem{DenyRead: []string{"/a"}, AllowRead: []string{"/r"}, AllowWrite: []string{"/w"}, DenyWrite: []string{"/dw"}},
		Network:    Network{AllowedDomains: []string{"a.com"}, DeniedDomains: []string{"x.a.com"}, AllowedIPRanges: []string{"10.0.0.0/8"}, Hosts: map[string]string{"h1": "1.1.1.1", "h2": "2.2.2.2"}},
		Limits:     Limits{Timeout: Duration(time.Minute), MaxOutputBytes: 100, MaxProcesses: 10, MaxMemoryBytes: 64 << 20, MaxFileSizeBytes: 5, MaxOpenFiles: 20, TmpBytes: 2 << 20},
	}
	q := Policy{
		Filesystem: Filesystem{DenyRead: []string{"/b"}, AllowRead: []string{"/r2"}, AllowWrite: []string{"/w2"}, DenyWrite: []string{"/dw2"}, AllowGitConfig: true},
		Network:    Network{AllowedDomains: []string{"b.com"}, DeniedDomains: []string{"y.b.com"}, AllowedIPRanges: []string{"::1"}, Hosts: map[string]string{"h2": "3.3.3.3", "h3": "4.4.4.4"}},
		Limits:     Limits{Timeout: Duration(time.Second), MaxProcesses: 8},
	}
	pCopy := clonePolicy(p)
	m := Merge(p, q)
	want := Policy{
		Filesystem: Filesystem{DenyRead: []string{"/a", "/b"}, AllowRead: []string{"/r", "/r2"}, AllowWrite: []string{"/w", "/w2"}, DenyWrite: []string{"/dw", "/dw2"}, AllowGitConfig: true},
		Network:    Network{AllowedDomains: []string{"a.com", "b.com"}, DeniedDomains: []string{"x.a.com", "y.b.com"}, AllowedIPRanges: []string{"10.0.0.0/8", "::1"}, Hosts: map[string]string{"h1": "1.1.1.1", "h2": "3.3.3.3", "h3": "4.4.4.4"}},
		Limits:     Limits{Timeout: Duration(time.Second), MaxOutputBytes: 100, MaxProcesses: 8, MaxMemoryBytes: 64 << 20, MaxFileSizeBytes: 5, MaxOpenFiles: 20, TmpBytes: 2 << 20},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("Merge:\n got  %+v\n want %+v", m, want)
	}
	// The inputs are not changed, and the result shares no list or map with them.
	m.Filesystem.DenyRead[0] = "changed"
	m.Network.AllowedDomains[0] = "changed"
	m.Network.Hosts["h1"] = "changed"
	if !reflect.DeepEqual(p, pCopy) {
		t.Fatalf("Merge changed its first argument: %+v", p)
	}
	// Appending to p's lists (spare capacity) must not show up in the result.
	p2 := Policy{Filesystem: Filesystem{AllowWrite: make([]string, 1, 10)}}
	m2 := Merge(p2, Policy{Filesystem: Filesystem{AllowWrite: []string{"/q"}}})
	_ = append(p2.Filesystem.AllowWrite, "/sneaky")
	if got := m2.Filesystem.AllowWrite; len(got) != 2 || got[1] != "/q" {
		t.Fatalf("Merge aliases its input's backing array: %q", got)
	}
	// Merging nothing changes nothing; zero limits and a false flag do not override.
	if got := Merge(p, Policy{}); !reflect.DeepEqual(normalize(got), normalize(pCopy)) {
		t.Fatalf("Merge(p, {}) = %+v, want p", got)
	}
	if got := Merge(Policy{}, Policy{}); !reflect.DeepEqual(normalize(got), Policy{}) || got.Network.Hosts != nil {
		t.Fatalf("Merge({}, {}) = %+v", got)
	}
	if got := Merge(Policy{Filesystem: Filesystem{AllowGitConfig: true}}, Policy{}); !got.Filesystem.AllowGitConfig {
		t.Fatal("a false AllowGitConfig in q must not clear p's")
	}
}

func clonePolicy(p Policy) Policy {
	b, _ := json.Marshal(p)
	var q Policy
	_ = json.Unmarshal(b, &q)
	return q
}

// Both spellings of a network key add up, as they do for filesystem keys:
// a deny list in one spelling must not be dropped by the other.
func TestSettingsMixedSpellingsKeepDenies(t *testing.T) {
	p, err := ParseSettings([]byte(`{"network":{"allowedDomains":["*.example.com"],"deniedDomains":["evil.example.com"],"denied_domains":["other.example.com"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecider(p.Network)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"evil.example.com", "other.example.com"} {
		if got := d.Decide(h, 443); got.Allow {
			t.Errorf("%s is denied in the settings file but allowed (%s); parsed denied_domains = %q", h, got.Rule, p.Network.DeniedDomains)
		}
	}
}
