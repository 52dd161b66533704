package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/bench"
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
		&cli.BoolFlag{Name: "disk", Usage: "instead (root): workspaces as filesystems of their own vs directories: creating a session, a 1 GB sequential write and 10,000 small files"},
		&cli.BoolFlag{Name: "net", Usage: "instead: curl a 200 MB file and a small file over loopback, direct vs through the sandbox's proxy (CONNECT)"},
		&cli.BoolFlag{Name: "tls", Usage: "instead: HTTPS over loopback, direct vs through the sandbox's TLS-terminating proxy with a masked credential: a kept-alive request, a new connection, a 200 MB download, pip download of 20 wheels"},
		&cli.StringFlag{Name: "against", Usage: "also time `BIN` exec (another srt-mcp build) in the same rounds, and print this build's ratio to it"},
		&cli.BoolFlag{Name: "load", Usage: "instead: --clients MCP TypeScript SDK clients, each in its own session, run cells back to back for --seconds against a server on its defaults; errors, p50/p99, throughput, and the server's RSS, descriptors, processes and goroutines before and after"},
		&cli.IntFlag{Name: "clients", Value: 50, Usage: "with --load: concurrent clients"},
		&cli.IntFlag{Name: "seconds", Value: 60, Usage: "with --load: how long they run"},
		&cli.StringFlag{Name: "client-dir", Usage: "with --load and --cold: the directory with load.mjs and the SDK's node_modules (default $SRT_MCP_CLIENTS, else integration/mcpclient)"},
		&cli.BoolFlag{Name: "json", Usage: "with --load: print the report as one JSON line"},
		&cli.BoolFlag{Name: "prestart", Usage: "instead: execute_code of python3 -c 1 and of true through the MCP TypeScript SDK, one call at a time, with and without pre-started sandboxes (--sandbox-pool), vs the bare commands, p50"},
		&cli.BoolFlag{Name: "cold", Usage: "instead: cold-run throughput, 10 concurrent MCP TypeScript SDK clients calling execute_code vs 10 concurrent minimal-bwrap loops"},
		&cli.BoolFlag{Name: "costs", Usage: "instead: what a model reads per turn, in bytes and tokens: tools/list per --tools profile and the replies of typical calls (content[0].text, structuredContent, the whole result), beside mcp-run-python's and E2B's MCP server's; a markdown table"},
		&cli.StringFlag{Name: "peers-dir", Usage: "with --costs: where bench/peers' packages are installed (mcp-run-python, the tokenizer; default $SRT_MCP_PEERS, else bench/peers)"},
		&cli.StringFlag{Name: "e2b-server", Usage: "with --costs: a build of github.com/e2b-dev/mcp-server packages/js (build/index.js; default $SRT_MCP_E2B_SERVER): its npm name is not published"},
		&cli.BoolFlag{Name: "all", Usage: "every part above, each against its anchor in the same run, then one table of every row with its goal"},
	},
	Action: runBench,
}

// runBench measures this binary: its exec and serve are what the bench
// starts.
func runBench(c *cli.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return bench.Run(bench.Select(c.Bool), bench.Options{
		Binary: self, Rounds: c.Int("rounds"), Warmup: c.Int("warmup"), Python: c.String("python"),
		Docker: c.Bool("docker"), Image: c.String("image"), Against: c.String("against"),
		Clients: c.Int("clients"), Seconds: c.Int("seconds"), ClientDir: c.String("client-dir"), JSON: c.Bool("json"),
		PeersDir: c.String("peers-dir"), E2BServer: c.String("e2b-server"),
	})
}
