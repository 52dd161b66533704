package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSettings(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		code     string // "" = valid
		mention  []string
		check    func(t *testing.T, p Policy)
	}{
		{name: "srt file", in: `{"network":{"allowedDomains":["pypi.org","*.github.com"],"deniedDomains":["evil.com"]},
			"filesystem":{"denyRead":["~/.ssh"],"allowRead":["~/.ssh/known_hosts"],"allowWrite":["."],"denyWrite":[".env",{"path":"a[1].txt","literal":true}],"allowGitConfig":true}}`,
			check: func(t *testing.T, p Policy) {
				if len(p.Network.AllowedDomains) != 2 || p.Filesystem.DenyWrite[1] != `a\[1\].txt` || !p.Filesystem.AllowGitConfig {
					t.Fatalf("%+v", p)
				}
			}},
		{name: "snake case and limits", in: `{"network":{"allowed_domains":["x.com"]},"filesystem":{"deny_read":["/secret"]},"limits":{"timeout":"30s","max_processes":64}}`,
			check: func(t *testing.T, p Policy) {
				if p.Limits.Timeout.Std() != 30*time.Second || p.Limits.MaxProcesses != 64 || p.Filesystem.DenyRead[0] != "/secret" {
					t.Fatalf("%+v", p)
				}
			}},
		{name: "accepted false srt flags", in: `{"network":{"allowedDomains":[],"allowLocalBinding":false,"allowUnixSockets":[]},"filesystem":{},"enableWeakerNestedSandbox":false,"allowPty":true}`},
		{name: "malformed", in: "{\n  \"network\": {,\n}", code: CodeInvalidSettings, mention: []string{"line 2", "column"}},
		{name: "empty", in: "  ", code: CodeInvalidSettings, mention: []string{"empty"}},
		{name: "array", in: `[]`, code: CodeInvalidSettings, mention: []string{"JSON object"}},
		{name: "unknown top", in: `{"netwrok":{}}`, code: CodeInvalidSettings, mention: []string{"netwrok", "unknown key"}},
		{name: "unknown network key", in: `{"network":{"allowedDomain":[]}}`, code: CodeInvalidSettings, mention: []string{"network.allowedDomain"}},
		{name: "wrong type", in: `{"filesystem":{"denyRead":"~/.ssh"}}`, code: CodeInvalidSettings, mention: []string{"filesystem.denyRead", "list"}},
		{name: "bad literal entry", in: `{"filesystem":{"denyWrite":[{"pat":"x"}]}}`, code: CodeInvalidSettings, mention: []string{"filesystem.denyWrite[0]"}},
		{name: "unsupported true", in: `{"enableWeakerNestedSandbox":true}`, code: CodeUnsupported, mention: []string{"enableWeakerNestedSandbox"}},
		{name: "local binding true", in: `{"network":{"allowLocalBinding":true}}`, code: CodeUnsupported, mention: []string{"network.allowLocalBinding"}},
		{name: "credentials", in: `{"credentials":{}}`, code: CodeUnsupported, mention: []string{"credentials"}},
		{name: "invalid domain", in: `{"network":{"allowedDomains":["ok.com","*.com"]}}`, code: CodeInvalidDomain, mention: []string{"network.allowed_domains[1]", "*.com"}},
		{name: "bad limit", in: `{"limits":{"max_memory_bytes":1000}}`, code: CodeInvalidLimit, mention: []string{"limits.max_memory_bytes"}},
		{name: "unknown limit", in: `{"limits":{"max_cpus":2}}`, code: CodeInvalidSettings, mention: []string{"limits", "max_cpus"}},
		{name: "bad glob", in: `{"filesystem":{"denyRead":["a[b"]}}`, code: CodeInvalidPath, mention: []string{"filesystem.deny_read[0]", "glob"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseSettings([]byte(tc.in))
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.check != nil {
					tc.check(t, p)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("want %s, got %v", tc.code, err)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("error %q should mention %q", err, m)
				}
			}
		})
	}
}

func TestNarrow(t *testing.T) {
	ceiling := Policy{
		Network:    Network{AllowedDomains: []string{"pypi.org", "*.github.com", "api.x.com:443"}, DeniedDomains: []string{"bad.github.com"}},
		Filesystem: Filesystem{AllowRead: []string{"/data"}, AllowWrite: []string{"/work"}},
		Limits:     Limits{Timeout: Duration(time.Minute), MaxMemoryBytes: 1 << 30},
	}
	ok := []Policy{
		{},
		{Network: Network{AllowedDomains: []string{"pypi.org"}}},
		{Network: Network{AllowedDomains: []string{"api.github.com", "*.raw.github.com"}}},
		{Network: Network{AllowedDomains: []string{"api.x.com:443"}, DeniedDomains: []string{"pypi.org"}}},
		{Filesystem: Filesystem{AllowWrite: []string{"/work/sub", "/tmp/x"}, AllowRead: []string{"/data/a", "/work"}, DenyRead: []string{"/anything"}}},
		{Limits: Limits{Timeout: Duration(10 * time.Second), MaxMemoryBytes: 64 << 20}},
	}
	for i, call := range ok {
		p, err := Narrow(ceiling, call, "/work", "/home/u")
		if err != nil {
			t.Fatalf("ok[%d]: %v", i, err)
		}
		if len(p.Network.DeniedDomains) < 1 || p.Network.DeniedDomains[0] != "bad.github.com" {
			t.Fatalf("ok[%d]: the ceiling's denies must stay: %+v", i, p.Network)
		}
	}
	p, _ := Narrow(ceiling, Policy{}, "/work", "/home/u")
	if p.Limits.Timeout.Std() != time.Minute || len(p.Network.AllowedDomains) != 3 {
		t.Fatalf("an empty call gets the ceiling: %+v", p)
	}
	for _, tc := range []struct {
		call  Policy
		field string
	}{
		{Policy{Network: Network{AllowedDomains: []string{"evil.com"}}}, "network.allowed_domains[0]"},
		{Policy{Network: Network{AllowedDomains: []string{"github.com"}}}, "network.allowed_domains[0]"},
		{Policy{Network: Network{AllowedDomains: []string{"*.com.github.com", "*.x.com"}}}, "network.allowed_domains[1]"},
		{Policy{Network: Network{AllowedDomains: []string{"api.x.com"}}}, "network.allowed_domains[0]"},
		{Policy{Network: Network{AllowedDomains: []string{"api.x.com:8443"}}}, "network.allowed_domains[0]"},
		{Policy{Network: Network{AllowedIPRanges: []string{"10.0.0.0/8"}}}, "network.allowed_ip_ranges"},
		{Policy{Network: Network{Hosts: map[string]string{"pypi.org": "1.2.3.4"}}}, "network.hosts"},
		{Policy{Filesystem: Filesystem{AllowWrite: []string{"/data"}}}, "filesystem.allow_write[0]"},
		{Policy{Filesystem: Filesystem{AllowWrite: []string{"../etc"}}}, "filesystem.allow_write[0]"},
		{Policy{Filesystem: Filesystem{AllowRead: []string{"/etc"}}}, "filesystem.allow_read[0]"},
		{Policy{Limits: Limits{MaxMemoryBytes: 2 << 30}}, "limits.max_memory_bytes"},
		{Policy{Limits: Limits{Timeout: Duration(time.Hour)}}, "timeout_seconds"},
	} {
		_, err := Narrow(ceiling, tc.call, "/work", "/home/u")
		var pe *Error
		if !errors.As(err, &pe) || pe.Field != tc.field {
			t.Errorf("%+v: want an error on %s, got %v", tc.call, tc.field, err)
		}
	}
}

func TestMandatoryDenied(t *testing.T) {
	f := Filesystem{}
	for rel, want := range map[string]bool{
		".bashrc": true, "sub/.bashrc": true, ".git/hooks": true, ".git/hooks/pre-commit": true, ".git/config": true,
		".vscode/settings.json": true, ".claude/commands/x.md": true, ".claude/settings.json": false, "src/main.go": false,
		".git/HEAD": false, ".gitignore": false, ".mcp.json": true,
	} {
		if got := f.IsMandatoryDenied(rel, false); got != want {
			t.Errorf("IsMandatoryDenied(%q) = %v, want %v", rel, got, want)
		}
	}
	if (&Filesystem{AllowGitConfig: true}).IsMandatoryDenied(".git/config", false) {
		t.Error("AllowGitConfig did not lift .git/config")
	}
	if !f.IsMandatoryDenied(".git", true) {
		t.Error("a .git file (worktree) must be protected")
	}
}
