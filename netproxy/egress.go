package netproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/tlsca"
)

// Egress starts one execution's proxy on the two listeners the runner
// opened in its sandbox (httpL for HTTP and CONNECT, socksL for SOCKS5),
// deciding with cfg's network policy and requiring its token, and reports
// each decision and each request it sees into to report as a
// runner.Violation. With a CA in cfg it terminates HTTPS tunnels and
// swaps cfg's credentials. The returned Closer stops it and reports the
// bytes it carried. It is the runner.EgressFunc main hands the runner: the
// runner opens the listeners, netproxy decides and dials (runner cannot
// import netproxy, which imports it for Violation).
func Egress(cfg runner.EgressConfig, httpL, socksL net.Listener, report func(runner.Violation)) (io.Closer, error) {
	n := cfg.Network
	var deniedRecords, allowedRecords, unrecorded atomic.Int64
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
	pc := Config{
		Decider: dec, Token: cfg.Token, Resolver: res, AllowedRanges: ranges, Network: n,
		AllowPlaintextInject: cfg.AllowPlaintextInject,
		OnDecision: func(d Decision) {
			// The host is what the sandbox asked for (SOCKS5 carries any
			// bytes as a name): it reaches clients and the audit log only
			// made safe to show.
			v := runner.Violation{Kind: "network", Decision: "deny", Host: printable.String(d.Host), Port: d.Port, Rule: d.Rule, Protocol: d.Protocol, Reason: dec.ReasonFor(d.Rule)}
			if d.Allow {
				v.Decision = "allow"
			}
			report(v)
		},
		OnRequest: func(r Request) {
			// Each request is an event and an audit line. A request that
			// carried a credential is always recorded; of the others, a
			// run gets its first maxRequestRecords refused ones and
			// maxAllowedRecords allowed ones recorded and a count of the
			// rest (a loop of refused requests cannot push the ones that
			// matter out).
			if len(r.Credentials) == 0 {
				n, max := &deniedRecords, int64(maxRequestRecords)
				if r.Decision == "allow" {
					n, max = &allowedRecords, maxAllowedRecords
				}
				if n.Add(1) > max {
					unrecorded.Add(1)
					return
				}
			}
			report(runner.Violation{Kind: "request", Decision: r.Decision, Host: printable.String(r.Host), Port: r.Port, Path: r.Path, Rule: r.Rule,
				Protocol: r.Scheme, Method: r.Method, Status: r.Status, Credentials: r.Credentials, BytesOut: r.BytesOut, BytesIn: r.BytesIn})
		},
	}
	if len(cfg.Secrets) > 0 {
		pc.Swapper = credentials.NewSwapper(cfg.Secrets)
	}
	if n.TLSTerminate != nil && len(cfg.CACert) > 0 {
		ca, err := tlsca.ParseCA(cfg.CACert, cfg.CAKey)
		if err != nil {
			return nil, err
		}
		pc.CA = ca
		if pc.Roots, err = tlsca.UpstreamRoots(n.TLSTerminate.ExtraCACertPaths); err != nil {
			return nil, err
		}
	}
	p, err := New(pc)
	if err != nil {
		return nil, err
	}
	go p.ServeHTTP(httpL)
	go p.ServeSOCKS(socksL)
	return &egressCloser{p: p, report: report, unrecorded: &unrecorded}, nil
}

// Egress is what the runner's option asks for.
var _ runner.EgressFunc = Egress

// maxRequestRecords and maxAllowedRecords bound the records of refused
// and of allowed requests (without a credential) of one execution.
const (
	maxRequestRecords = 1000
	maxAllowedRecords = 10000
)

// egressCloser stops the proxy and reports what it carried.
type egressCloser struct {
	p          *Proxy
	report     func(runner.Violation)
	unrecorded *atomic.Int64
}

func (e *egressCloser) Close() error {
	err := e.p.Close()
	if n := e.unrecorded.Load(); n > 0 {
		e.report(runner.Violation{Kind: "request", Decision: "unrecorded", Rule: fmt.Sprintf("%d more requests were not recorded (per execution: every one that carried a credential, %d refused, %d allowed)", n, maxRequestRecords, maxAllowedRecords)})
	}
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
