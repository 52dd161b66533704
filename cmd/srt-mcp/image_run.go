//go:build !embedserver

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/dockerbox"
)

func runImageBuild(c *cli.Context) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := dockerbox.BuildImage(ctx, dockerbox.BuildOptions{Tag: c.String("tag"), Dockerfile: c.Bool("dockerfile"),
		Mirror: c.String("mirror"), Force: c.Bool("force"), Log: os.Stderr})
	if err != nil {
		return cli.Exit("image build: "+err.Error(), 1)
	}
	return nil
}
