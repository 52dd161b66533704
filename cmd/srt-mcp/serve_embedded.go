//go:build embedserver

package main

import (
	_ "embed"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
)

// serverBinary is the full srt-mcp build (with the MCP server), embedded by
// make build. This light binary keeps the sandbox's hot paths free of the
// MCP library's start-up cost (its JSON-schema dependency compiles every
// meta-schema at init: about 4.5 ms for every process of the binary).
//
//go:embed embedded/srt-mcp-full
var serverBinary []byte

// runServe executes the embedded server with the same arguments; its
// runners and sandboxes use this light binary. The server is written to an
// anonymous, sealed memory file and executed from there: nothing is
// written to a shared directory, so no other local user can plant or swap
// the binary a (root) server runs.
func runServe(c *cli.Context) error {
	if len(serverBinary) == 0 {
		return cli.Exit("this srt-mcp was built without its MCP server; build it with make build", 1)
	}
	self, err := os.Executable()
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	env := append(append(os.Environ(), runnerBinaryEnv+"="+self), stageEnv()...)
	argv := append([]string{"srt-mcp"}, os.Args[1:]...)
	if err := execSealed("srt-mcp-server", serverBinary, argv, env); err != nil {
		return cli.Exit("start the embedded server: "+err.Error(), 1)
	}
	return nil
}
