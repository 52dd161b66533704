package netproxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/runner"
)

// recordingResolver answers every name with 192.0.2.1 and remembers what
// it was asked.
type recordingResolver struct{ asked []string }

func (r *recordingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.asked = append(r.asked, host)
	return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
}

func TestHostsResolver(t *testing.T) {
	next := &recordingResolver{}
	h := hostsResolver{next: next, hosts: map[string]string{
		"pinned.test":    "10.1.2.3",
		"Dotted.Test.":   "2001:db8::1", // a trailing dot and any case name the same host
		"inet-aton.test": "2130706433",  // the C library's spelling of 127.0.0.1
		"broken.test":    "not-an-ip",   // unusable: the system answers
	}}
	for _, tc := range []struct {
		host, want string
		asked      bool
	}{
		{"pinned.test", "10.1.2.3", false},
		{"PINNED.test", "10.1.2.3", false},
		{"dotted.test", "2001:db8::1", false},
		{"inet-aton.test", "127.0.0.1", false},
		{"broken.test", "192.0.2.1", true},
		{"other.test", "192.0.2.1", true},
		{"sub.pinned.test", "192.0.2.1", true}, // a pin is one name, not a suffix
	} {
		next.asked = nil
		addrs, err := h.LookupNetIP(context.Background(), "ip", tc.host)
		if err != nil || len(addrs) != 1 || addrs[0].String() != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.host, addrs, err, tc.want)
		}
		if asked := slices.Contains(next.asked, tc.host); asked != tc.asked {
			t.Errorf("%s: asked the system %v, want %v", tc.host, asked, tc.asked)
		}
	}
}

// Egress decides with the policy, answers pinned names itself, reports
// each decision as a runner.Violation and, on Close, the bytes it carried.
func TestEgress(t *testing.T) {
	_, port := upstream(t, "hello-through-egress")
	var mu sync.Mutex
	var got []runner.Violation
	report := func(v runner.Violation) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, v)
	}
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	sl, _ := net.Listen("tcp", "127.0.0.1:0")
	n := policy.Network{AllowedDomains: []string{"pinned.test:" + port}, AllowedIPRanges: []string{"127.0.0.0/8"},
		Hosts: map[string]string{"pinned.test": "127.0.0.1"}}
	closer, err := Egress(runner.EgressConfig{Network: n, Token: "tok"}, hl, sl, report)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: hl.Addr().String(), User: url.UserPassword("srt", "tok")})}}
	get := func(u string) (int, string) {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://pinned.test:" + port + "/"); code != 200 || body != "hello-through-egress" {
		t.Fatalf("the pinned, allowed name: %d %q", code, body)
	}
	// The request's record is made after its response is written.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
	}
	if code, _ := get("http://other.test:" + port + "/"); code != http.StatusForbidden {
		t.Fatalf("a name not allowed: %d", code)
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 4 {
		t.Fatalf("reported %+v, want an allow, its request, a deny and the transfer", got)
	}
	allow, req, deny, transfer := got[0], got[1], got[2], got[3]
	if req.Kind != "request" || req.Decision != "allow" || req.Method != "GET" || req.Path != "/" || req.Status != 200 || req.BytesIn != int64(len("hello-through-egress")) || req.Protocol != "http" {
		t.Errorf("request record: %+v", req)
	}
	if allow.Kind != "network" || allow.Decision != "allow" || allow.Host != "pinned.test" || allow.Protocol != "http" ||
		allow.Rule != "allowed_domains: pinned.test:"+port {
		t.Errorf("allow: %+v", allow)
	}
	if deny.Kind != "network" || deny.Decision != "deny" || deny.Host != "other.test" || deny.Rule != policy.RuleNotAllowed {
		t.Errorf("deny: %+v", deny)
	}
	if transfer.Kind != "network" || transfer.Decision != "transfer" || transfer.BytesIn <= 0 || transfer.BytesOut <= 0 {
		t.Errorf("transfer: %+v", transfer)
	}
}

func TestEgressRefusesABadPolicy(t *testing.T) {
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	sl, _ := net.Listen("tcp", "127.0.0.1:0")
	defer hl.Close()
	defer sl.Close()
	_, err := Egress(runner.EgressConfig{Network: policy.Network{AllowedDomains: []string{"x.test"}, AllowedIPRanges: []string{"not-a-cidr"}}, Token: "tok"}, hl, sl,
		func(runner.Violation) { t.Error("a report from a proxy that should not have started") })
	if err == nil {
		t.Fatal("an invalid allowed_ip_ranges was accepted")
	}
}
