//go:build !linux

package runner

import (
	"context"
	"os"
)

// prestarted: sandboxes are started ahead of their runs on Linux only.
type prestarted struct{}

func startPrestarted(Spec, Options) *prestarted { return nil }

func (t *prestarted) discard() {}

func (t *prestarted) ready() bool { return false }

func (t *prestarted) begin() {}

// claim: nothing is pre-started here; every run starts its own sandbox.
func claim(context.Context, *Run, *Plan, *initConfig, [3]*os.File, Options) (sandboxProc, error) {
	return nil, nil
}

func startPrestartedQuietly(Spec, Options) *prestarted { return nil }
