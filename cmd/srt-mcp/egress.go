package main

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/srt-mcp/srt-mcp/netproxy"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/runner"
)

// egress wires netproxy into the runner: the runner opens the listeners in
// the sandbox, netproxy decides and dials.
func egress(n policy.Network, token string, httpL, socksL net.Listener, report func(runner.Violation)) (io.Closer, error) {
	dec, err := policy.NewDecider(n)
	if err != nil {
		return nil, err
	}
	ranges, err := n.Ranges()
	if err != nil {
		return nil, err
	}
	var res netproxy.Resolver = net.DefaultResolver
	if len(n.Hosts) > 0 {
		res = hostsResolver{hosts: n.Hosts, next: net.DefaultResolver}
	}
	p, err := netproxy.New(netproxy.Config{
		Decider: dec, Token: token, Resolver: res, AllowedRanges: ranges,
		OnDecision: func(d netproxy.Decision) {
			v := runner.Violation{Kind: "network", Decision: "deny", Host: d.Host, Port: d.Port, Rule: d.Rule, Protocol: d.Protocol}
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

// egressCloser stops the proxy and reports what it carried.
type egressCloser struct {
	p      *netproxy.Proxy
	report func(runner.Violation)
}

func (e *egressCloser) Close() error {
	err := e.p.Close()
	if out, in := e.p.Bytes(); out+in > 0 {
		e.report(runner.Violation{Kind: "network", Decision: "transfer", BytesOut: out, BytesIn: in})
	}
	return err
}

// hostsResolver answers the operator's pinned names, then asks the system.
type hostsResolver struct {
	hosts map[string]string
	next  netproxy.Resolver
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
