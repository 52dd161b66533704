// Package servicetest builds a run service for the unit tests of the
// packages above it (the doors, the server's routes): a real session
// registry in a temporary state directory, an empty runtime registry, a
// download signer, and a backend that starts no sandbox unless the test
// brings one. Runs are the runner's and the integration suite's to test;
// ownership, files, signing and the doors' wire formats are tested here
// against the real service.
package servicetest

import (
	"errors"
	"testing"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Secret signs the download URLs of a service New makes (when cfg names
// no signer), at BaseURL.
const (
	Secret  = "unit-test-secret-0123456789abcdef"
	BaseURL = "http://127.0.0.1:8080"
)

// New is service.New(cfg) on a registry of its own in t.TempDir(); what
// cfg leaves unset gets the package's defaults. The service and registry
// shut down when the test ends.
func New(t testing.TB, cfg service.Config) *service.Service {
	t.Helper()
	reg, err := sessions.New(sessions.Config{StateDir: t.TempDir(), Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sessions = reg
	if cfg.Backend == nil {
		cfg.Backend = NoSandboxes{&backend.Native{}}
	}
	if cfg.Runtimes == nil {
		cfg.Runtimes = &profiles.Runtimes{}
	}
	if cfg.Files == nil {
		cfg.Files = &service.Signer{Secret: []byte(Secret), BaseURL: BaseURL}
	}
	s := service.New(cfg, executions.NewManager(executions.Config{}))
	t.Cleanup(func() {
		s.Shutdown()
		reg.Shutdown()
	})
	return s
}

// NoSandboxes is a backend that starts nothing.
type NoSandboxes struct{ *backend.Native }

// Start implements backend.Backend: refused.
func (NoSandboxes) Start(*backend.Box, runner.Spec, func(runner.Event)) (runner.Handle, error) {
	return nil, errors.New("no sandboxes in unit tests")
}
