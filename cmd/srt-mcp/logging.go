//go:build !embedserver

package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// newLogger builds the server's slog logger from --log-format, --log-level
// and --log-file.
func newLogger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(c.String("log-level")))); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", c.String("log-level"))
	}
	var w io.Writer = os.Stderr
	if f := c.String("log-file"); f != "" {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, fmt.Errorf("--log-file: %v", err)
		}
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
		if err != nil {
			return nil, fmt.Errorf("--log-file: %v", err)
		}
		w = fh
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "console":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use json or console", c.String("log-format"))
}
