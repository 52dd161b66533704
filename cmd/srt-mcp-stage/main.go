// Command srt-mcp-stage is the small build of the code srt-mcp runs inside
// a sandbox: the exec stage ("__srt-exec"), our own PID 1 ("__srt-init")
// and the Docker backend's exec stage ("__docker-exec"). make build embeds
// it in srt-mcp, and a server hands it to every runner as a sealed memory
// file: a process of this 3.5 MB binary (no proxy, no CLI, no MCP) costs a
// fraction of the CPU of the 30 MB srt-mcp binary (see runner/README.md).
//
// It is not a command for people; run srt-mcp.
package main

import (
	"fmt"
	"os"

	"github.com/srt-mcp/srt-mcp/runner"
)

func main() {
	runner.DispatchStage()
	fmt.Fprintln(os.Stderr, "srt-mcp-stage holds the stages srt-mcp runs inside its sandboxes; run srt-mcp instead")
	os.Exit(2)
}
