//go:build !embedserver

package main

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/librechat"
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
		key, err := readPublicKey(f)
		if err != nil {
			return nil, fmt.Errorf("--librechat-jwt-public-key %s: %v", f, err)
		}
		cfg.JWTKeys = append(cfg.JWTKeys, key)
	}
	return cfg, nil
}

func readPublicKey(file string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("no PEM block; want a PUBLIC KEY (PKIX) in PEM")
	}
	key, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		if rk, rerr := x509.ParsePKCS1PublicKey(blk.Bytes); rerr == nil {
			return rk, nil
		}
		return nil, err
	}
	return key, nil
}
