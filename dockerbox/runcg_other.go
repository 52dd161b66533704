//go:build !linux

package dockerbox

import (
	"errors"
	"syscall"
)

// runCgroup: Docker's containers, and their cgroups, are Linux.
type runCgroup struct{}

func runCgroupHierarchies() int { return 1 }

func newRunCgroup(int, string) (*runCgroup, error) {
	return nil, errors.New("run cgroups are Linux-only")
}
func (c *runCgroup) procs() []int          { return nil }
func (c *runCgroup) signal(syscall.Signal) {}
func (c *runCgroup) kill()                 {}
func (c *runCgroup) remove()               {}
