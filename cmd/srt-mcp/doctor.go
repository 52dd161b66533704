package main

import "github.com/urfave/cli/v2"

var doctorCommand = &cli.Command{Name: "doctor", Usage: "report what this host supports", Action: func(c *cli.Context) error { return nil }}
var benchCommand = &cli.Command{Name: "bench", Hidden: true, Action: func(c *cli.Context) error { return nil }}
