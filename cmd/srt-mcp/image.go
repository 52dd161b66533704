package main

import (
	"github.com/urfave/cli/v2"
)

// defaultImage is defaultImage (the light build does not link
// the Docker client).
const defaultImage = "srt-mcp-python:latest"

var imageCommand = &cli.Command{
	Name:  "image",
	Usage: "the Docker backend's Python data image",
	Subcommands: []*cli.Command{{
		Name:  "build",
		Usage: "build the image: from Debian's packages with debootstrap (no registry needed; root), or from the Dockerfile",
		Description: `The registry-free build (the default) runs debootstrap with the Python data
stack from the host's Debian mirror and imports the result with the Docker
engine (a few minutes; skipped when the image already has the same recipe).
--dockerfile builds dockerbox/Dockerfile (python:3.12-slim + pip) instead,
for hosts that reach a registry and PyPI.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tag", Value: defaultImage, EnvVars: []string{"SANDBOX_IMAGE"}, Usage: "image name"},
			&cli.BoolFlag{Name: "dockerfile", Usage: "build from the Dockerfile (needs a registry and PyPI)"},
			&cli.StringFlag{Name: "mirror", Usage: "Debian mirror (default: the host's apt source)"},
			&cli.BoolFlag{Name: "force", Usage: "rebuild even when the image is up to date"},
		},
		Action: runImageBuild,
	}},
}
