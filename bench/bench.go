// Package bench is `srt-mcp bench`: it times srt-mcp's paths (exec, an MCP
// call, a data session, a workspace, the Docker backend, the egress proxy
// (tunnelling and terminating TLS), many clients at once, cold-run throughput) against their anchors (bare
// python3, minimal bwrap, docker exec, a direct download) in the same run,
// interleaved so that machine noise hits both alike, and prints each
// ratio with its goal. It also weighs what srt-mcp costs a model per turn
// (its catalogue and replies, in bytes and tokens) beside its peers'.
//
// It drives a real srt-mcp binary (Options.Binary: its exec and serve
// commands) as a user would, so it measures what a release does, not a
// test double.
package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/srt-mcp/srt-mcp/runner"
)

// Mode is one part of the bench (a flag of `srt-mcp bench`).
type Mode string

// The parts of the bench. Exec is the default.
const (
	All       Mode = "all"
	Cold      Mode = "cold"
	Load      Mode = "load"
	Net       Mode = "net"
	TLS       Mode = "tls"
	Workspace Mode = "workspace"
	Docker    Mode = "docker"
	Data      Mode = "data"
	MCP       Mode = "mcp"
	Exec      Mode = "exec"
	Disk      Mode = "disk"
	Costs     Mode = "costs"
	Prestart  Mode = "prestart"
)

// selectOrder is which part wins when several are asked for: --docker is
// also a modifier of --workspace, so Workspace comes before it.
var selectOrder = []Mode{All, Cold, Load, Net, TLS, Workspace, Docker, Data, MCP, Disk, Costs, Prestart}

// Select picks the part of the bench the flags ask for: set reports
// whether the flag of that name is set. Exec when none is.
func Select(set func(name string) bool) Mode {
	for _, m := range selectOrder {
		if set(string(m)) {
			return m
		}
	}
	return Exec
}

// Options are what `srt-mcp bench` was asked for.
type Options struct {
	// Binary is the srt-mcp binary whose exec and serve are measured
	// (the running one).
	Binary string
	// Rounds are the measured rounds, after Warmup unmeasured ones.
	Rounds, Warmup int
	// Python is the interpreter every part runs.
	Python string
	// Docker runs Workspace on the Docker backend, with Image.
	Docker bool
	Image  string
	// Against is another srt-mcp build Exec also times, in the same rounds.
	Against string
	// Clients and Seconds shape Load: concurrent clients, for how long.
	Clients, Seconds int
	// ClientDir holds load.mjs and the MCP TypeScript SDK's node_modules
	// (Load and Cold); "" is $SRT_MCP_CLIENTS, else integration/mcpclient.
	ClientDir string
	// PeersDir holds the peers Costs compares against and its tokenizer
	// (bench/peers' node_modules); "" is $SRT_MCP_PEERS, else bench/peers.
	PeersDir string
	// E2BServer is a build of E2B's MCP server (packages/js/build/index.js)
	// for Costs; "" is $SRT_MCP_E2B_SERVER, else not measured.
	E2BServer string
	// JSON prints Load's report as one JSON line.
	JSON bool
	// Out receives the tables; nil is standard output.
	Out io.Writer
}

// Run runs one part of the bench (All: every part, then one table).
func Run(m Mode, o Options) error {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	s := &suite{Options: o}
	switch m {
	case All:
		return s.all()
	case Cold:
		return s.cold()
	case Load:
		return s.load()
	case Net:
		return s.net()
	case TLS:
		return s.tls()
	case Workspace:
		return s.workspace()
	case Docker:
		return s.docker()
	case Data:
		return s.data()
	case MCP:
		return s.mcp()
	case Exec:
		return s.exec()
	case Disk:
		return s.disk()
	case Prestart:
		return s.prestart()
	case Costs:
		return s.costs()
	}
	return fmt.Errorf("bench: unknown part %q", m)
}

// suite is one run of the bench: its options, and the summary rows when
// it runs every part (All); a part run alone prints only its own table.
type suite struct {
	Options
	summary *[]Row
}

// add records a row of the summary, when there is one.
func (s *suite) add(r Row) {
	if s.summary != nil {
		*s.summary = append(*s.summary, r)
	}
}

func (s *suite) printf(format string, args ...any) { fmt.Fprintf(s.Out, format, args...) }

// exitError is a failure the user can act on (a missing tool, a server
// that would not start): srt-mcp prints it and exits with status 1 (other
// errors exit 2). Its ExitCode method is what urfave/cli's ExitCoder, which
// main looks for, asks of an error.
type exitError struct{ msg string }

func (e exitError) Error() string { return e.msg }
func (e exitError) ExitCode() int { return 1 }

func fail(msg string) error { return exitError{msg} }

var errNoBwrap = fail("bench needs bwrap: apt-get install -y bubblewrap")

// execCase is one variant of the exec part: a command line and its times.
type execCase struct {
	name string
	argv []string
	ms   []float64
}

// exec times python3 -c 1 bare, under minimal bwrap and under srt-mcp
// exec, interleaved.
func (s *suite) exec() error {
	py := s.Python
	bwrap, err := runner.FindBwrap()
	if err != nil {
		return errNoBwrap
	}
	wd, _ := os.Getwd()
	cases := []*execCase{
		{name: "bare python3 -c 1", argv: []string{py, "-c", "1"}},
		{name: "minimal bwrap", argv: []string{bwrap, "--unshare-all", "--die-with-parent", "--new-session",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", py, "-c", "1"}},
		{name: "srt-mcp exec", argv: []string{s.Binary, "exec", "--", py, "-c", "1"}},
	}
	if other := s.Against; other != "" {
		cases = append(cases, &execCase{name: "--against exec", argv: []string{other, "exec", "--", py, "-c", "1"}})
	}
	one := func(bc *execCase) (float64, error) {
		cmd := exec.Command(bc.argv[0], bc.argv[1:]...)
		cmd.Dir = wd
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v: %s", bc.name, err, out)
		}
		return sinceMS(start), nil
	}
	for i := 0; i < s.Warmup; i++ {
		for _, bc := range cases {
			if _, err := one(bc); err != nil {
				return fail(err.Error())
			}
		}
	}
	for i := 0; i < s.Rounds; i++ {
		for _, bc := range cases {
			ms, err := one(bc)
			if err != nil {
				return fail(err.Error())
			}
			bc.ms = append(bc.ms, ms)
		}
	}
	s.execTable(cases)
	who := "root"
	if os.Geteuid() != 0 {
		who = "not root"
	}
	if m, a := median(cases[2].ms), median(cases[1].ms); a > 0 {
		s.add(Row{Path: "srt-mcp exec -- python3 -c 1 vs minimal bwrap (median, " + who + ")", Now: fmt.Sprintf("%.1f ms", m),
			Anchor: fmt.Sprintf("%.1f ms", a), Ratio: fmt.Sprintf("%.2fx", m/a), Goal: "<= 1.3x", Met: m/a <= 1.3})
	}
	return nil
}

// execTable prints the exec part's table: each variant against minimal
// bwrap (the second case), and this build against --against's (the fourth).
func (s *suite) execTable(cases []*execCase) {
	anchor := median(cases[1].ms)
	s.printf("%-22s %8s %8s %8s %10s\n", "variant", "median", "p90", "min", "vs bwrap")
	for _, bc := range cases {
		m := median(bc.ms)
		s.printf("%-22s %6.2fms %6.2fms %6.2fms %9.2fx\n", bc.name, m, pct(bc.ms, 0.9), pct(bc.ms, 0), m/anchor)
	}
	if len(cases) > 3 {
		s.printf("\nthis build vs --against %s: %.3fx (median), %.3fx (p90)\n", s.Against,
			median(cases[2].ms)/median(cases[3].ms), pct(cases[2].ms, 0.9)/pct(cases[3].ms, 0.9))
	}
	s.printf("\nrounds: %d (interleaved), goal: srt-mcp exec <= 1.30x minimal bwrap\n", s.Rounds)
}

func median(xs []float64) float64 { return pct(xs, 0.5) }

// pct is the p-quantile of xs (0 <= p <= 1) by the nearest rank: p 0 is
// the minimum, 1 the maximum; 0 when xs is empty. xs is left unsorted.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

// sinceMS is the milliseconds since start, to the microsecond.
func sinceMS(start time.Time) float64 { return float64(time.Since(start).Microseconds()) / 1000 }
