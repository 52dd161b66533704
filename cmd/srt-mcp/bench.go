package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/runner"
)

var benchCommand = &cli.Command{
	Name:  "bench",
	Usage: "time `python3 -c 1` bare, under minimal bwrap, and under srt-mcp exec, in one interleaved run",
	Description: `Each round runs the three variants once, in turn, so that machine noise hits
them alike. Prints the median and p90 of each and the ratio of srt-mcp exec
to minimal bwrap (the issue's goal is at most 1.3x).`,
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "rounds", Aliases: []string{"n"}, Value: 60, Usage: "measured rounds"},
		&cli.IntFlag{Name: "warmup", Value: 5, Usage: "unmeasured rounds first"},
		&cli.StringFlag{Name: "python", Value: "/usr/bin/python3", Usage: "interpreter to run"},
		&cli.BoolFlag{Name: "mcp", Usage: "instead: execute_code(python3 -c print(1)) over Streamable HTTP vs minimal bwrap, p50/p99"},
		&cli.BoolFlag{Name: "data", Usage: "instead: run_python(print(2+2)) in a warm session and the first import pandas, seaborn of a new session, vs bare python3 and minimal bwrap"},
		&cli.BoolFlag{Name: "workspace", Usage: "instead: a warm cell through MCP, the first import pandas, seaborn with and without the warm pool, and an idle warm session's memory (with --docker: on the Docker backend)"},
		&cli.BoolFlag{Name: "docker", Usage: "instead: warm run_python(print(2+2)) on the Docker backend vs docker exec of the same command, and vs the bubblewrap backend"},
		&cli.StringFlag{Name: "image", Value: defaultImage, Usage: "with --docker: the image"},
		&cli.BoolFlag{Name: "net", Usage: "instead: curl a 200 MB file and a small file over loopback, direct vs through the sandbox's proxy (CONNECT)"},
		&cli.StringFlag{Name: "against", Usage: "also time `BIN` exec (another srt-mcp build) in the same rounds, and print this build's ratio to it"},
		&cli.BoolFlag{Name: "load", Usage: "instead: --clients MCP TypeScript SDK clients, each in its own session, run cells back to back for --seconds against a server on its defaults; errors, p50/p99, throughput, and the server's RSS, descriptors, processes and goroutines before and after"},
		&cli.IntFlag{Name: "clients", Value: 50, Usage: "with --load: concurrent clients"},
		&cli.IntFlag{Name: "seconds", Value: 60, Usage: "with --load: how long they run"},
		&cli.StringFlag{Name: "client-dir", Usage: "with --load and --cold: the directory with load.mjs and the SDK's node_modules (default $SRT_MCP_CLIENTS, else integration/mcpclient)"},
		&cli.BoolFlag{Name: "json", Usage: "with --load: print the report as one JSON line"},
		&cli.BoolFlag{Name: "cold", Usage: "instead: cold-run throughput, 10 concurrent MCP TypeScript SDK clients calling execute_code vs 10 concurrent minimal-bwrap loops"},
		&cli.BoolFlag{Name: "all", Usage: "every part above, each against its anchor in the same run, then one table of every row with its goal"},
	},
	Action: runBench,
}

type benchCase struct {
	name string
	argv []string
	ms   []float64
}

func runBench(c *cli.Context) error {
	if c.Bool("all") {
		return runAllBench(c)
	}
	if c.Bool("cold") {
		return runColdBench(c)
	}
	if c.Bool("load") {
		return runLoadBench(c)
	}
	if c.Bool("net") {
		return runNetBench(c)
	}
	if c.Bool("workspace") {
		return runWorkspaceBench(c)
	}
	if c.Bool("docker") {
		return runDockerBench(c)
	}
	if c.Bool("data") {
		return runDataBench(c)
	}
	if c.Bool("mcp") {
		return runMCPBench(c)
	}
	return runExecBench(c)
}

// runExecBench times python3 -c 1 bare, under minimal bwrap and under
// srt-mcp exec, interleaved.
func runExecBench(c *cli.Context) error {
	py := c.String("python")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bwrap, err := runner.FindBwrap()
	if err != nil {
		return cli.Exit("bench needs bwrap: apt-get install -y bubblewrap", 1)
	}
	wd, _ := os.Getwd()
	cases := []*benchCase{
		{name: "bare python3 -c 1", argv: []string{py, "-c", "1"}},
		{name: "minimal bwrap", argv: []string{bwrap, "--unshare-all", "--die-with-parent", "--new-session",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", py, "-c", "1"}},
		{name: "srt-mcp exec", argv: []string{self, "exec", "--", py, "-c", "1"}},
	}
	if other := c.String("against"); other != "" {
		cases = append(cases, &benchCase{name: "--against exec", argv: []string{other, "exec", "--", py, "-c", "1"}})
	}
	one := func(bc *benchCase) (float64, error) {
		cmd := exec.Command(bc.argv[0], bc.argv[1:]...)
		cmd.Dir = wd
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v: %s", bc.name, err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	}
	for i := 0; i < c.Int("warmup"); i++ {
		for _, bc := range cases {
			if _, err := one(bc); err != nil {
				return cli.Exit(err.Error(), 1)
			}
		}
	}
	for i := 0; i < c.Int("rounds"); i++ {
		for _, bc := range cases {
			ms, err := one(bc)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			bc.ms = append(bc.ms, ms)
		}
	}
	anchor := median(cases[1].ms)
	fmt.Printf("%-22s %8s %8s %8s %10s\n", "variant", "median", "p90", "min", "vs bwrap")
	for _, bc := range cases {
		m := median(bc.ms)
		fmt.Printf("%-22s %6.2fms %6.2fms %6.2fms %9.2fx\n", bc.name, m, pct(bc.ms, 0.9), pct(bc.ms, 0), m/anchor)
	}
	if len(cases) > 3 {
		fmt.Printf("\nthis build vs --against %s: %.3fx (median), %.3fx (p90)\n", c.String("against"),
			median(cases[2].ms)/median(cases[3].ms), pct(cases[2].ms, 0.9)/pct(cases[3].ms, 0.9))
	}
	fmt.Printf("\nrounds: %d (interleaved), goal: srt-mcp exec <= 1.30x minimal bwrap\n", c.Int("rounds"))
	who := "root"
	if os.Geteuid() != 0 {
		who = "not root"
	}
	if m, a := median(cases[2].ms), median(cases[1].ms); a > 0 {
		addBenchRow(benchRow{Path: "srt-mcp exec -- python3 -c 1 vs minimal bwrap (median, " + who + ")", Now: fmt.Sprintf("%.1f ms", m),
			Anchor: fmt.Sprintf("%.1f ms", a), Ratio: fmt.Sprintf("%.2fx", m/a), Goal: "<= 1.3x", Met: m/a <= 1.3})
	}
	return nil
}

func median(xs []float64) float64 { return pct(xs, 0.5) }

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}
