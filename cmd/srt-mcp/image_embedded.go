//go:build embedserver

package main

import "github.com/urfave/cli/v2"

// runImageBuild runs in the embedded full build, which links the Docker
// client (see runServe).
func runImageBuild(c *cli.Context) error { return runServe(c) }
