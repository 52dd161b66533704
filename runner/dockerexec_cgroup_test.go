//go:build linux

package runner

import "testing"

// The Docker exec stage waits until every hierarchy the server moves it
// into names the run's cgroup, not only the first.
func TestInCgroup(t *testing.T) {
	v1 := []byte("12:pids:/docker/c1/srt-run-ab\n11:freezer:/docker/c1\n1:name=systemd:/docker/c1\n0::/\n")
	if inCgroup(v1, "srt-run-ab", 2) {
		t.Error("in the pids hierarchy only, counted as in both")
	}
	if !inCgroup(v1, "srt-run-ab", 1) || !inCgroup(v1, "srt-run-ab", 0) {
		t.Error("in one hierarchy, not seen")
	}
	both := []byte("12:pids:/docker/c1/srt-run-ab\n11:freezer:/docker/c1/srt-run-ab\n0::/\n")
	if !inCgroup(both, "srt-run-ab", 2) {
		t.Error("in both, not seen")
	}
	if inCgroup([]byte("0::/srt-run-abc\n"), "srt-run-ab", 1) {
		t.Error("another run's cgroup whose name starts alike was taken for this one")
	}
}
