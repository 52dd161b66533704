package policy

import (
	"errors"
	"testing"
	"time"
)

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
