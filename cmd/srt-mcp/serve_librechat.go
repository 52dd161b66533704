//go:build !embedserver

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/server"
)

// libreChatConfig builds the Code API's configuration from the flags.
func libreChatConfig(c *cli.Context, host string) (*librechat.Config, error) {
	if c.String("librechat-prefix") == "" {
		return nil, nil
	}
	cfg := &librechat.Config{Prefix: c.String("librechat-prefix"), APIKey: c.String("librechat-api-key"),
		NoAuth: c.Bool("librechat-no-auth"), RateScale: c.Float64("librechat-rate-scale")}
	if cfg.NoAuth && !isLoopback(host) && !c.Bool("insecure-no-auth") {
		return nil, fmt.Errorf("--librechat-no-auth on %s would let anyone who reaches it run code: use it on a loopback bind, set --librechat-api-key or --librechat-jwt-public-key, or add --insecure-no-auth", host)
	}
	for _, f := range c.StringSlice("librechat-jwt-public-key") {
		key, err := server.ReadPublicKey(f)
		if err != nil {
			return nil, fmt.Errorf("--librechat-jwt-public-key %s: %v", f, err)
		}
		cfg.JWTKeys = append(cfg.JWTKeys, key)
	}
	return cfg, nil
}
