package runner

import (
	"os"
	"testing"
)

// TestMain lets the test binary play every hidden mode of srt-mcp: the
// runner re-executes it ("__runner"), and bwrap runs it inside sandboxes
// ("__srt-exec", "__srt-init"), exactly as it does the real binary
// (runc's libcontainer/integration/init_test.go does the same).
func TestMain(m *testing.M) {
	Dispatch(Options{})
	os.Exit(m.Run())
}
