//go:build !linux

package runner

import (
	"fmt"
	"os"
)

// dockerExecMain: containers are Linux.
func dockerExecMain() int {
	fmt.Fprintln(os.Stderr, "srt-mcp: __docker-exec runs in Linux containers only")
	return 125
}
