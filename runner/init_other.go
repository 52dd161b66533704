//go:build !linux

package runner

import (
	"fmt"
	"os"
)

// initMain and execMain exist only inside Linux sandboxes.
func initMain() int {
	fmt.Fprintln(os.Stderr, "srt-mcp: the sandbox init stage exists only on Linux")
	return 125
}

func execMain() int { return initMain() }
