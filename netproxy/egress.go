package netproxy

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
	"github.com/srt-mcp/srt-mcp/runner"
)

// Egress starts one execution's proxy on the two listeners the runner
// opened in its sandbox (httpL for HTTP and CONNECT, socksL for SOCKS5),
// deciding with n and requiring token, and reports each decision to
// report as a runner.Violation. The returned Closer stops it and reports
// the bytes it carried. It is the runner.EgressFunc main hands the runner:
// the runner opens the listeners, netproxy decides and dials (runner
// cannot import netproxy, which imports it for Violation).
func Egress(n policy.Network, token string, httpL, socksL net.Listener, report func(runner.Violation)) (io.Closer, error) {
	dec, err := policy.NewDecider(n)
	if err != nil {
		return nil, err
	}
	ranges, err := n.Ranges()
	if err != nil {
		return nil, err
	}
	var res Resolver = net.DefaultResolver
	if len(n.Hosts) > 0 {
		res = hostsResolver{hosts: n.Hosts, next: net.DefaultResolver}
	}
	p, err := New(Config{
		Decider: dec, Token: token, Resolver: res, AllowedRanges: ranges,
		OnDecision: func(d Decision) {
			// The host is what the sandbox asked for (SOCKS5 carries any
			// bytes as a name): it reaches clients and the audit log only
			// made safe to show.
			v := runner.Violation{Kind: "network", Decision: "deny", Host: printable.String(d.Host), Port: d.Port, Rule: d.Rule, Protocol: d.Protocol}
			if d.Allow {
				v.Decision = "allow"
			}
			report(v)
		},
	})
	if err != nil {
		return nil, err
	}
	go p.ServeHTTP(httpL)
	go p.ServeSOCKS(socksL)
	return &egressCloser{p: p, report: report}, nil
}

// Egress is what the runner's option asks for.
var _ runner.EgressFunc = Egress

// egressCloser stops the proxy and reports what it carried.
type egressCloser struct {
	p      *Proxy
	report func(runner.Violation)
}

func (e *egressCloser) Close() error {
	err := e.p.Close()
	if out, in := e.p.Bytes(); out+in > 0 {
		e.report(runner.Violation{Kind: "network", Decision: "transfer", BytesOut: out, BytesIn: in})
	}
	return err
}

// hostsResolver answers the operator's pinned names (--resolve HOST=IP),
// then asks next.
type hostsResolver struct {
	hosts map[string]string
	next  Resolver
}

func (h hostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	for name, ip := range h.hosts {
		if strings.EqualFold(strings.TrimSuffix(name, "."), host) {
			if a, ok := policy.ParseIP(ip); ok {
				return []netip.Addr{a}, nil
			}
		}
	}
	return h.next.LookupNetIP(ctx, network, host)
}
