package policy

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestNormalizeTarget(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b":            "/a/b",
		"/a/../b":         "/b",
		"/a/%2e%2E/admin": "/admin",
		`/a\b/../admin`:   "/a/admin",
		"//admin":         "/admin",
		"/a//b":           "/a//b", // not ambiguous: forwarded as spelled
		"/a/./b":          "/a/b",
		"/a/b/.":          "/a/b/",
		"/../..":          "/",
		"/%2Fx":           "/%2Fx",
	} {
		if got := NormalizeTarget(in); got != want {
			t.Errorf("NormalizeTarget(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequestRuleMatch(t *testing.T) {
	r := RequestRule{Host: "api.example.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/", "/user"}}
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/repos/acme/x", true},
		{"GET", "/repos/acme/", true},
		{"GET", "/repos/acme", false},
		{"GET", "/repos/acmeevil/x", false},
		{"GET", "/user", true},
		{"GET", "/user/keys", true},
		{"GET", "/users", false},
		{"POST", "/repos/acme/x", false},
	} {
		if got := r.Match(c.method, c.path); got != c.want {
			t.Errorf("Match(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

func TestNarrowEgress(t *testing.T) {
	ceiling := Policy{
		Network: Network{AllowedDomains: []string{"api.example.com"}, TLSTerminate: &TLSTerminate{}},
		Credentials: &Credentials{
			EnvVars: []CredentialEnv{{Name: "A", Mode: "mask"}, {Name: "B", Mode: "mask"}, {Name: "C", Mode: "deny"}},
			Files:   []CredentialFile{{Path: "/etc/tok", Mode: "mask"}},
		},
	}
	call := func(js string) (Policy, error) {
		var c Policy
		if err := json.Unmarshal([]byte(js), &c); err != nil {
			t.Fatal(err)
		}
		return Narrow(ceiling, c, "/tmp", "/root")
	}
	out, err := call(`{"credentials": ["A"], "network": {"request_rules": [{"host": "api.example.com", "methods": ["GET"]}], "require_host_match": true}}`)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, e := range out.Credentials.EnvVars {
		modes[e.Name] = e.Mode
	}
	for _, f := range out.Credentials.Files {
		modes[f.Path] = f.Mode
	}
	if modes["A"] != "mask" || modes["B"] != "deny" || modes["C"] != "deny" || modes["/etc/tok"] != "deny" {
		t.Errorf("a call that picks A must keep A masked and withhold the rest: %v", modes)
	}
	if len(out.Network.CallRequestRules) != 1 || len(out.Network.RequestRules) != 0 || !out.Network.RequireHostMatch {
		t.Errorf("the call's rules are kept apart from the operator's: %+v", out.Network)
	}
	if ceiling.Credentials.EnvVars[1].Mode != "mask" {
		t.Error("Narrow changed the ceiling")
	}
	out, err = call(`{}`)
	if err != nil || out.Credentials.EnvVars[1].Mode != "mask" {
		t.Errorf("a call naming no credentials gets the operator's: %v %+v", err, out.Credentials)
	}
	if out, err := Narrow(Policy{}, Policy{Credentials: &Credentials{Use: []string{}}}, "/tmp", "/root"); err != nil || out.Credentials != nil {
		t.Errorf("no credentials offered, none asked for: %v %+v", err, out.Credentials)
	}
	for js, field := range map[string]string{
		`{"credentials": ["NOPE"]}`:                                   "credentials[0]",
		`{"credentials": ["C"]}`:                                      "credentials[0]",
		`{"credentials": {"env_vars": [{"name":"X","mode":"mask"}]}}`: "credentials",
		`{"network": {"tls_terminate": {}}}`:                          "network.tls_terminate",
		`{"network": {"ambiguous_request_target": "asSpelled"}}`:      "network.ambiguous_request_target",
		`{"network": {"allow_plaintext_header_set": true}}`:           "network.allow_plaintext_header_set",
		`{"network": {"call_request_rules": [{"host": "x.com"}]}}`:    "network.call_request_rules",
	} {
		_, err := call(js)
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeExceedsCeiling || pe.Field != field {
			t.Errorf("%s: got %v, want %s on %s", js, err, CodeExceedsCeiling, field)
		}
	}
}
