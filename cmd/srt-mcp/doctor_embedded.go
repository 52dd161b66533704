//go:build embedserver

package main

import "github.com/urfave/cli/v2"

// runDoctor runs in the embedded full build, which links the Docker client
// (see runServe): the light binary, which every sandbox start executes,
// stays free of its start-up cost.
func runDoctor(c *cli.Context) error { return runServe(c) }
