package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/dockerbox"
	"github.com/srt-mcp/srt-mcp/netproxy"
)

// dockerBackend connects the Docker backend, removes the containers of
// dead servers, and keeps doing so every d.CleanupInterval.
func dockerBackend(d Docker, stateDir, persistDir, instance, execStage string, fileSize int64, native *backend.Native, prestart func() bool, logger *slog.Logger) (*dockerbox.Backend, error) {
	b, err := dockerbox.New(context.Background(), dockerbox.Config{Image: d.Image, Memory: d.Memory, CPUs: d.CPUs,
		StateDir: stateDir, PersistDir: persistDir, Instance: instance, Egress: netproxy.Egress, ExecStage: execStage, FileSize: fileSize, Native: native,
		Prestart: prestart})
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
		if persistDir != filepath.Join(stateDir, "persistent") {
			// Replicas sharing the persistent directory: their dead
			// containers hold workspaces this one may resume.
			if n, err := b.CleanupForeign(ctx); n > 0 || err != nil {
				logger.Info("removed containers of other state directories' servers that are gone", "containers", n, "error", err)
			}
		}
	}
	sweep()
	if every := d.CleanupInterval; every > 0 {
		go func() {
			for range time.Tick(every) {
				sweep()
			}
		}()
	}
	return b, nil
}
