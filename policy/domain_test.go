package policy

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func TestDecisionsFromTestdata(t *testing.T) {
	var cases []struct {
		Name    string   `json:"name"`
		Allowed []string `json:"allowed"`
		Denied  []string `json:"denied"`
		Host    string   `json:"host"`
		Port    int      `json:"port"`
		Allow   bool     `json:"allow"`
		Rule    string   `json:"rule"`
		Invalid bool     `json:"invalid"`
	}
	data, err := os.ReadFile("testdata/decisions.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			d, err := NewDecider(Network{AllowedDomains: c.Allowed, DeniedDomains: c.Denied})
			if c.Invalid {
				if err == nil {
					t.Fatal("want a validation error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := d.Decide(c.Host, c.Port)
			if got.Allow != c.Allow || (c.Rule != "" && got.Rule != c.Rule) {
				t.Fatalf("Decide(%q, %d) = %+v, want allow=%v rule=%q", c.Host, c.Port, got, c.Allow, c.Rule)
			}
		})
	}
}

func TestPatternsFromTestdata(t *testing.T) {
	var cases []struct {
		Pattern string `json:"pattern"`
		Deny    bool   `json:"deny"`
		OK      bool   `json:"ok"`
		Why     string `json:"why"`
	}
	data, _ := os.ReadFile("testdata/patterns.json")
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := ParsePattern(c.Pattern, c.Deny)
		if (err == nil) != c.OK {
			t.Errorf("ParsePattern(%q, deny=%v) error = %v, want ok=%v", c.Pattern, c.Deny, err, c.OK)
			continue
		}
		if err != nil && c.Why != "" && !strings.Contains(err.Error(), c.Why) {
			t.Errorf("ParsePattern(%q): error %q should mention %q", c.Pattern, err, c.Why)
		}
	}
}

func TestParseIPLikeInetAton(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"127.1": "127.0.0.1", "10.0x100": "10.0.1.0", "0x7f000001": "127.0.0.1", "::ffff:10.0.0.1": "10.0.0.1", "::1": "::1",
	} {
		got, ok := ParseIP(in)
		if !ok || got.String() != want {
			t.Errorf("ParseIP(%q) = %v %v, want %s", in, got, ok, want)
		}
	}
	for _, bad := range []string{"256.0.0.1", "1.2.3.4.5", "0x", "1.2.3.256", "example.com", "", "1..2", "08.1.1.1", "fe80::1%eth0"} {
		if a, ok := ParseIP(bad); ok && bad != "0x" {
			t.Errorf("ParseIP(%q) = %v, want not an IP", bad, a)
		}
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"example.com", "*.x.com:443", "[::1]:80", "127.1", "*", "a..b", "x.com:0"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, deny bool) {
		p, err := ParsePattern(s, deny)
		if err != nil {
			return
		}
		q, err := ParsePattern(p.String(), deny)
		if err != nil {
			t.Fatalf("%q parsed, but its canonical form %q does not: %v", s, p.String(), err)
		}
		if q.String() != p.String() || q.Wildcard != p.Wildcard || q.Port != p.Port || q.Any != p.Any {
			t.Fatalf("%q -> %q -> %q: not stable", s, p.String(), q.String())
		}
		// A wildcard never matches an IP literal.
		if p.Wildcard && p.Match("127.0.0.1", 80) {
			t.Fatalf("%q matched an IP literal", s)
		}
	})
}

func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{"Example.COM.", "2130706433", "0x7f.1", "[::ffff:1.2.3.4]", "a..b", "x_y.com", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CanonicalHost(s)
		if err != nil {
			return
		}
		c2, err := CanonicalHost(c)
		if err != nil || c2 != c {
			t.Fatalf("CanonicalHost not idempotent: %q -> %q -> %q (%v)", s, c, c2, err)
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			if got, ok := ParseIP(s); !ok || got != a {
				t.Fatalf("ParseIP(%q) = %v, netip says %v", s, got, a)
			}
		}
	})
}
