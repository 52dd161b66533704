package settings

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/srt-mcp/srt-mcp/policy"
)

// settleDelay is how long the directory must be quiet before the file is
// read again: a writer's several events become one reload.
const settleDelay = 100 * time.Millisecond

// Watch reloads the ceiling when f's file changes, until ctx ends. Each
// new reading (checked against flags, serve's flag names) goes to ceiling,
// which computes the ceiling a start with it would make; apply gets that.
// A reading that fails either is logged and refused: the settings in force
// stay. It watches the file's directory, so that a file replaced by a
// rename (editors, Kubernetes ConfigMap volumes) is seen too.
func Watch(ctx context.Context, f *File, flags []string, logger *slog.Logger,
	ceiling func(*File) (policy.Policy, error), apply func(policy.Policy)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(f.Path)); err != nil {
		w.Close()
		return err
	}
	go func() {
		defer w.Close()
		var settle <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				logger.Warn("settings file watch", "path", f.Path, "error", err)
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				// Any change in the directory: read the file again once it
				// has settled.
				settle = time.After(settleDelay)
			case <-settle:
				settle = nil
				next, err := Read(f.Path, flags)
				if err == nil && next.sum == f.sum {
					continue
				}
				var p policy.Policy
				if err == nil {
					p, err = ceiling(next)
				}
				if err != nil {
					logger.Error("settings file refused: the settings in force stay", "path", f.Path, "error", err.Error())
					continue
				}
				for _, k := range ChangedKeys(f, next) {
					if !IsCeilingKey(k) {
						logger.Warn("settings file: this key takes effect at the next start", "path", f.Path, "key", k)
					}
				}
				apply(p)
				f = next
				logger.Info("settings file reloaded: new executions get the new ceiling", "path", f.Path,
					"allowed_domains", p.Network.AllowedDomains, "denied_domains", p.Network.DeniedDomains)
			}
		}
	}()
	return nil
}
