package main

import (
	"github.com/urfave/cli/v2"
)

var doctorCommand = &cli.Command{
	Name:  "doctor",
	Usage: "report what this host supports for sandboxing, and how to fix what is missing",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		sandboxUserFlag,
		&cli.StringFlag{Name: "image", Value: defaultImage, EnvVars: []string{"SANDBOX_IMAGE"}, Usage: "the Docker backend's image to check"},
	},
	Action: runDoctor,
}
