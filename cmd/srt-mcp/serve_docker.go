//go:build !embedserver

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/dockerbox"
	"github.com/srt-mcp/srt-mcp/netproxy"
)

// dockerBackend connects the Docker backend, removes the containers of
// dead servers, and keeps doing so every --cleanup-interval-minutes.
func dockerBackend(c *cli.Context, stateDir, instance, execStage string, fileSize int64, native *backend.Native, logger *slog.Logger) (*dockerbox.Backend, error) {
	memFlag := c.String("container-memory")
	if v := os.Getenv("SANDBOX_MEMORY_LIMIT"); v != "" {
		memFlag = v
	}
	mem, err := parseSize(memFlag)
	if err != nil {
		return nil, fmt.Errorf("container memory limit %q: %v", memFlag, err)
	}
	if c.Float64("cpu-limit") <= 0 {
		return nil, fmt.Errorf("--cpu-limit must be positive")
	}
	b, err := dockerbox.New(context.Background(), dockerbox.Config{Image: c.String("image"), Memory: mem, CPUs: c.Float64("cpu-limit"),
		StateDir: stateDir, Instance: instance, Egress: netproxy.Egress, ExecStage: execStage, FileSize: fileSize, Native: native})
	if err != nil {
		return nil, err
	}
	sweep := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, err := b.Cleanup(ctx)
		if n > 0 || err != nil {
			logger.Info("removed containers of servers that are gone", "containers", n, "error", err)
		}
	}
	sweep()
	every := time.Duration(c.Float64("cleanup-interval-minutes") * float64(time.Minute))
	if every > 0 {
		go func() {
			for range time.Tick(every) {
				sweep()
			}
		}()
	}
	return b, nil
}
