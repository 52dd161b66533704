//go:build embedserver

package main

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"
)

// serverBinary is the full srt-mcp build (with the MCP server), embedded by
// make build. This light binary keeps the sandbox's hot paths free of the
// MCP library's start-up cost (its JSON-schema dependency compiles every
// meta-schema at init: about 4.5 ms for every process of the binary).
//
//go:embed embedded/srt-mcp-full
var serverBinary []byte

// runServe writes the embedded server to a private cache (once per build)
// and execs it with the same arguments; its runners and sandboxes use this
// light binary.
func runServe(c *cli.Context) error {
	if len(serverBinary) == 0 {
		return cli.Exit("this srt-mcp was built without its MCP server; build it with make build", 1)
	}
	self, err := os.Executable()
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	sum := sha256.Sum256(serverBinary)
	dir := filepath.Join(os.TempDir(), "srt-mcp-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return cli.Exit(fmt.Sprintf("%s is not a private directory; remove it", dir), 1)
	}
	path := filepath.Join(dir, "server-"+hex.EncodeToString(sum[:8]))
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(len(serverBinary)) {
		tmp, err := os.CreateTemp(dir, ".server-*")
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if _, err := tmp.Write(serverBinary); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return cli.Exit(err.Error(), 1)
		}
		tmp.Close()
		if err := os.Chmod(tmp.Name(), 0o755); err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return cli.Exit(err.Error(), 1)
		}
	}
	env := append(os.Environ(), "SRT_MCP_RUNNER_BIN="+self)
	argv := append([]string{"srt-mcp"}, os.Args[1:]...)
	return syscall.Exec(path, argv, env)
}
