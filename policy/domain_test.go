package policy

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// domainCase is one row of testdata/domains.json: a pattern, whether it
// parses (in the allow list, or in the deny list with in_deny_list), its
// canonical String(), and optionally one host:port it must or must not match.
type domainCase struct {
	Name       string `json:"name"`
	Pattern    string `json:"pattern"`
	InDenyList bool   `json:"in_deny_list"`
	Valid      bool   `json:"valid"`
	Why        string `json:"why"`       // a word the error must contain
	Canonical  string `json:"canonical"` // String() of the parsed pattern
	Host       string `json:"host"`      // any spelling; canonicalised first
	Port       int    `json:"port"`
	Match      bool   `json:"match"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestDomainsFromTestdata(t *testing.T) {
	var cases []domainCase
	readJSON(t, "testdata/domains.json", &cases)
	if len(cases) < 50 {
		t.Fatalf("only %d cases in testdata/domains.json", len(cases))
	}
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.Name] {
			t.Fatalf("duplicate case name %q", c.Name)
		}
		names[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			p, err := ParsePattern(c.Pattern, c.InDenyList)
			if (err == nil) != c.Valid {
				t.Fatalf("ParsePattern(%q, deny=%v) = %+v, %v; want valid=%v", c.Pattern, c.InDenyList, p, err, c.Valid)
			}
			if p.Raw != c.Pattern {
				t.Errorf("Raw = %q, want the entry as written %q", p.Raw, c.Pattern)
			}
			if err != nil {
				if c.Why != "" && !strings.Contains(err.Error(), c.Why) {
					t.Errorf("error %q should mention %q", err, c.Why)
				}
				return
			}
			if c.Canonical != "" && p.String() != c.Canonical {
				t.Errorf("String() = %q, want %q", p.String(), c.Canonical)
			}
			if c.Host == "" {
				return
			}
			h, err := CanonicalHost(c.Host)
			if err != nil {
				t.Fatalf("CanonicalHost(%q): %v", c.Host, err)
			}
			if got := p.Match(h, c.Port); got != c.Match {
				t.Errorf("%q.Match(%q -> %q, %d) = %v, want %v", c.Pattern, c.Host, h, c.Port, got, c.Match)
			}
		})
	}
}

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
		Field   string   `json:"field"`
	}
	readJSON(t, "testdata/decisions.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			d, err := NewDecider(Network{AllowedDomains: c.Allowed, DeniedDomains: c.Denied})
			if c.Invalid {
				var pe *Error
				if !errors.As(err, &pe) || pe.Code != CodeInvalidDomain {
					t.Fatalf("want an %s error, got %v", CodeInvalidDomain, err)
				}
				if c.Field != "" && pe.Field != c.Field {
					t.Fatalf("error names %q, want %q", pe.Field, c.Field)
				}
				// Validate agrees with NewDecider.
				pol := Policy{Network: Network{AllowedDomains: c.Allowed, DeniedDomains: c.Denied}}
				if err := pol.Validate(); err == nil {
					t.Fatal("Validate accepted what NewDecider refused")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Enabled() != (len(c.Allowed) > 0) {
				t.Errorf("Enabled() = %v with %d allowed entries", d.Enabled(), len(c.Allowed))
			}
			got := d.Decide(c.Host, c.Port)
			if got.Allow != c.Allow || (c.Rule != "" && got.Rule != c.Rule) {
				t.Fatalf("Decide(%q, %d) = %+v, want allow=%v rule=%q", c.Host, c.Port, got, c.Allow, c.Rule)
			}
			if got.Rule == "" {
				t.Fatalf("Decide(%q, %d): a decision always names its rule", c.Host, c.Port)
			}
		})
	}
}

func TestEmptyAllowListIsNoNetwork(t *testing.T) {
	for _, n := range []Network{{}, {AllowedDomains: []string{}}, {DeniedDomains: []string{"x.com"}}} {
		d, err := NewDecider(n)
		if err != nil {
			t.Fatal(err)
		}
		if d.Enabled() {
			t.Errorf("%+v: Enabled() = true", n)
		}
		for _, h := range []string{"example.com", "127.0.0.1", "::1"} {
			if got := d.Decide(h, 443); got.Allow || got.Rule != RuleNoNetwork {
				t.Errorf("%+v: Decide(%q) = %+v, want %q", n, h, got, RuleNoNetwork)
			}
		}
	}
}

func TestLoopbackSpellingsAreOneHost(t *testing.T) {
	for _, s := range []string{
		"127.0.0.1", "2130706433", "0x7f.1", "0x7F.0x1", "0177.0.0.1", "0177.1", "127.1", "127.0.1",
		"0x7f000001", "017700000001", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "::ffff:7f00:1", "127.0.0.1.",
	} {
		got, err := CanonicalHost(s)
		if err != nil || got != "127.0.0.1" {
			t.Errorf("CanonicalHost(%q) = %q, %v; want 127.0.0.1", s, got, err)
		}
		a, ok := ParseIP(strings.Trim(s, "[]"))
		if !ok || a != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("ParseIP(%q) = %v, %v", s, a, ok)
		}
	}
	// A deny entry in any spelling catches every other spelling.
	d, err := NewDecider(Network{AllowedDomains: []string{"localhost"}, DeniedDomains: []string{"0177.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"127.0.0.1", "2130706433", "[::ffff:127.0.0.1]", "127.1"} {
		if got := d.Decide(s, 80); got.Allow || got.Rule != "denied_domains: 0177.0.0.1" {
			t.Errorf("Decide(%q) = %+v", s, got)
		}
	}
}

func TestParseIPLikeInetAton(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"127.1": "127.0.0.1", "10.0x100": "10.0.1.0", "0x7f000001": "127.0.0.1", "::ffff:10.0.0.1": "10.0.0.1", "::1": "::1",
		"0": "0.0.0.0", "4294967295": "255.255.255.255", "1.16777215": "1.255.255.255", "1.2.65535": "1.2.255.255",
		"0xff.0xff.0xff.0xff": "255.255.255.255", "00.00.00.00": "0.0.0.0", "2001:DB8::1": "2001:db8::1",
	} {
		got, ok := ParseIP(in)
		if !ok || got.String() != want {
			t.Errorf("ParseIP(%q) = %v %v, want %s", in, got, ok, want)
		}
	}
	for _, bad := range []string{
		"256.0.0.1", "1.2.3.4.5", "1.2.3.256", "example.com", "", ".", "1..2", "08.1.1.1", "09", "fe80::1%eth0",
		"4294967296", "1.16777216", "1.2.65536", "0x100.1", "1.2.3.0x100", "-1", "+1", "1 ", " 1", "0b1", "0o7",
		"1_0", "0x_1", "::ffff:1.2.3.4%x", "1.2.3.4:80", "[::1]", "0xg",
	} {
		if a, ok := ParseIP(bad); ok {
			t.Errorf("ParseIP(%q) = %v, want not an IP", bad, a)
		}
	}
}

func TestPatternString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		deny bool
		want string
	}{
		{"*", true, "*"}, {"*:22", true, "*:22"}, {"*.X.com:443", false, "*.x.com:443"},
		{"[::1]", false, "[::1]"}, {"[::1]:80", false, "[::1]:80"}, {"0x7f.1", false, "127.0.0.1"},
	} {
		p, err := ParsePattern(tc.in, tc.deny)
		if err != nil || p.String() != tc.want {
			t.Errorf("ParsePattern(%q).String() = %q, %v; want %q", tc.in, p.String(), err, tc.want)
		}
	}
}

func samePattern(p, q Pattern) bool {
	return p.Host == q.Host && p.Wildcard == q.Wildcard && p.Any == q.Any && p.IP == q.IP && p.Port == q.Port
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{
		"example.com", "*.x.com:443", "[::1]:80", "127.1", "*", "*:22", "a..b", "x.com:0", "0x7f.1",
		"::ffff:1.2.3.4", "[::ffff:1.2.3.4]:8080", "Example.COM.", "*.com", "_a.b", "1.2.3.4.5", "*.1.2.3.4.5",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, deny bool) {
		p, err := ParsePattern(s, deny)
		if err != nil {
			return
		}
		canon := p.String()
		q, err := ParsePattern(canon, deny)
		if err != nil {
			t.Fatalf("%q parsed, but its canonical form %q does not: %v", s, canon, err)
		}
		if !samePattern(p, q) || q.String() != canon {
			t.Fatalf("%q -> %+v -> %q -> %+v: not the same pattern", s, p, canon, q)
		}
		// The deny list takes everything the allow list takes.
		if !deny {
			if r, err := ParsePattern(s, true); err != nil || !samePattern(p, r) {
				t.Fatalf("%q is valid in allowed_domains but not the same in denied_domains: %+v %v", s, r, err)
			}
			if p.Any {
				t.Fatalf("%q: a catch-all in allowed_domains", s)
			}
		}
		if p.Wildcard && p.IP.IsValid() {
			t.Fatalf("%q: a wildcard over an IP", s)
		}
		// A wildcard never matches an IP literal.
		if p.Wildcard {
			for _, ip := range []string{"127.0.0.1", "10.0.0.1", "::1", p.Host} {
				if a, ok := ParseIP(ip); ok && p.Match(a.String(), max(p.Port, 1)) {
					t.Fatalf("%q matched the IP %q", s, ip)
				}
			}
		}
		// An exact name or IP matches its own canonical host.
		if !p.Any && !p.Wildcard {
			h, err := CanonicalHost(p.Host)
			if err != nil || h != p.Host {
				t.Fatalf("%q: host %q is not canonical (%q, %v)", s, p.Host, h, err)
			}
			if !p.Match(h, max(p.Port, 1)) {
				t.Fatalf("%q does not match its own host %q", s, h)
			}
		}
	})
}

func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{
		"Example.COM.", "2130706433", "0x7f.1", "[::ffff:1.2.3.4]", "a..b", "x_y.com", "1.2.3.4", "[::1]",
		"0177.0.0.1", "127.1", "::ffff:127.0.0.1", "1.2.3.4.", "0x", "localhost", "\u212aelvin.com",
	} {
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
		if a, ok := ParseIP(c); ok {
			if a.String() != c {
				t.Fatalf("CanonicalHost(%q) = %q, an IP not in canonical form %q", s, c, a)
			}
		} else if c != strings.ToLower(c) || strings.HasSuffix(c, ".") {
			t.Fatalf("CanonicalHost(%q) = %q: names are lower-case without a trailing dot", s, c)
		}
		// The canonical host is a valid exact pattern that matches it.
		p, err := ParsePattern(c, false)
		if err != nil {
			t.Fatalf("CanonicalHost(%q) = %q, which is not a valid allowed_domains entry: %v", s, c, err)
		}
		if !p.Match(c, 443) {
			t.Fatalf("pattern %q does not match its own canonical host", c)
		}
	})
}

func FuzzParseIP(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.1", "::ffff:127.0.0.1", "::1", "1.2.3.4.",
		"0x", "08", "255.255.255.255", "4294967296", "1.2.3.04", "fe80::1%eth0", "0x7F.0X1", "01.2.3.4",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseIP(s)
		if n, err := netip.ParseAddr(s); err == nil && n.Is4() {
			// A plain dotted quad means the same to both parsers.
			if !ok || a != n {
				t.Fatalf("ParseIP(%q) = %v %v, netip says %v", s, a, ok, n)
			}
		}
		if !ok {
			if a.IsValid() {
				t.Fatalf("ParseIP(%q) failed but returned %v", s, a)
			}
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("ParseIP(%q) = %v: want a valid, unzoned, unmapped address", s, a)
		}
		if plainDottedQuad(s) {
			if n, err := netip.ParseAddr(s); err != nil || n != a {
				t.Fatalf("ParseIP(%q) = %v, netip says %v %v", s, a, n, err)
			}
		}
		// The canonical spelling parses to the same address.
		b, ok := ParseIP(a.String())
		if !ok || b != a {
			t.Fatalf("ParseIP(%q) = %v, but ParseIP(%q) = %v %v", s, a, a.String(), b, ok)
		}
	})
}

// plainDottedQuad reports whether s is four decimal numbers without
// leading zeros, the only IPv4 spelling net/netip accepts.
func plainDottedQuad(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || (len(p) > 1 && p[0] == '0') {
			return false
		}
		for _, c := range p {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

func TestDeniedAddr(t *testing.T) {
	d, err := NewDecider(Network{AllowedDomains: []string{"evil.test"}, DeniedDomains: []string{"127.0.0.1", "[::1]", "10.0.0.1:22", "other.test"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr     string
		port     int
		embedded []string
		want     bool
	}{
		{"127.0.0.1", 80, nil, true},
		{"::ffff:127.0.0.1", 80, nil, true},                  // mapped: unmapped first
		{"::ffff:0:7f00:1", 80, []string{"127.0.0.1"}, true}, // SIIT, with its embedded form
		{"::1", 443, nil, true},
		{"10.0.0.1", 22, nil, true},
		{"10.0.0.1", 80, nil, false}, // the port differs
		{"93.184.216.34", 80, nil, false},
	} {
		var emb []netip.Addr
		for _, e := range tc.embedded {
			emb = append(emb, netip.MustParseAddr(e))
		}
		if _, got := d.DeniedAddr(netip.MustParseAddr(tc.addr), tc.port, emb...); got != tc.want {
			t.Errorf("DeniedAddr(%s, %d) = %v", tc.addr, tc.port, got)
		}
	}
}
