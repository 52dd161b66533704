//go:build linux

package integration

// A directory workspace's quota removal taking what the user had
// (attack-dirquota review). The review's other two findings — files
// unlinked while open, and rewrites of existing files past the quota —
// are on branch attack-dirquota (dbfe7f2) until a kernel bound for
// directory workspaces lands.

import (
	"strings"
	"testing"
)

// Attack (or just an ordinary cell): the user has data.bin (40 MiB) from
// an earlier run; a cell moves it into archive/ (mv, os.rename) and then
// writes a 30 MiB result, which takes the workspace past the 64 MiB quota.
// What went wrong: Trim decides what a run made by path for workspace
// files (base.Files) and never records their inodes (Survey's known skips
// listed files), so the renamed pre-existing file counts as new, and,
// largest first, it is the one removed: the user's data is gone while the
// run's output stays ("Nothing that was there before is removed" does not
// hold). Suggested fix: record every workspace file's (dev, ino) in the
// survey too, and never remove an entry whose inode was there before
// (keep the path rule for rewritten files).
func TestHostileDirQuotaTrimTakesRenamedFile(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startDirQuota(t, backend)
		sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
		d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": `open("/mnt/data/data.bin", "wb").write(b"d" * (40 << 20))`})
		v, _ := d.call("execute_code", map[string]any{"session_id": sid, "language": "python", "code": `
import os, time
os.makedirs("/mnt/data/archive", exist_ok=True)
os.rename("/mnt/data/data.bin", "/mnt/data/archive/data.bin")
with open("/mnt/data/result.bin", "wb") as f:
    for _ in range(30):
        f.write(b"r" * (1 << 20))
time.sleep(2)
`})
		t.Logf("the cell: %.600s", flat(v))
		v, _ = d.call("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": `import os; print(sorted(os.listdir("/mnt/data")), os.path.exists("/mnt/data/archive/data.bin"))`})
		s, _ := v["stdout"].(string)
		t.Logf("afterwards: %s", s)
		if !strings.Contains(s, "True") {
			t.Errorf("the quota's removal took the user's pre-existing data.bin (renamed into archive/), not the run's output: %.400s", s)
		}
	})
}
