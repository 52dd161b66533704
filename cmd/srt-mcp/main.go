// Command srt-mcp runs code and commands in native OS sandboxes (bubblewrap
// on Linux, sandbox-exec on macOS): from a terminal with "srt-mcp exec", and
// for agents as an MCP server with "srt-mcp serve".
//
// The binary has hidden modes too: the per-execution runner and the stages
// that run inside the sandbox. runner.Dispatch selects them from argv[1]
// before the command line is parsed.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/netproxy"
	"github.com/srt-mcp/srt-mcp/runner"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	runner.Dispatch(runner.Options{Egress: netproxy.Egress})
	runner.CloexecFrom(3)
	app := &cli.App{
		Name:    "srt-mcp",
		Usage:   "run code and commands in native OS sandboxes, from a shell or as an MCP server",
		Version: version,
		Commands: []*cli.Command{
			execCommand,
			doctorCommand,
			benchCommand,
			serveCommand,
			auditCommand,
			imageCommand,
		},
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
	}
	if err := app.Run(os.Args); err != nil {
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			if msg := err.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, "srt-mcp:", msg)
			}
			os.Exit(ec.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "srt-mcp:", err)
		os.Exit(2)
	}
}
