package service

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/errs"
)

// An upload is admitted against what the session's directories take on
// disk: the cache (the sandbox's ~/.cache) and blocks preallocated past a
// file's size count. Before, both counted 0: 900 KiB of each left a
// 1 MiB quota open to an upload of 1 MiB more.
func TestUploadCountsCacheAndBlocks(t *testing.T) {
	s := newService(t, Config{WorkspaceQuota: 1 << 20})
	w, _, _ := s.OpenWorkspace(alice, "")
	if err := os.WriteFile(filepath.Join(w.ss.Cache, "blob"), make([]byte, 900<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteFile(alice, w, "upload_file", "a.bin", make([]byte, 200<<10), false); !errs.Has(err, errs.QuotaExceeded) {
		t.Errorf("an upload past the quota with 900 KiB in the cache: %v", err)
	}
	os.Remove(filepath.Join(w.ss.Cache, "blob"))
	f, err := os.Create(filepath.Join(w.ss.Workspace, "pre.bin"))
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 900<<10)
	f.Close()
	if err != nil {
		t.Skipf("fallocate here: %v", err)
	}
	if _, err := s.WriteFile(alice, w, "upload_file", "b.bin", make([]byte, 200<<10), false); !errs.Has(err, errs.QuotaExceeded) {
		t.Errorf("an upload past the quota with 900 KiB preallocated (size 0): %v", err)
	}
	if _, err := s.WriteFile(alice, w, "upload_file", "c.bin", make([]byte, 50<<10), false); err != nil {
		t.Errorf("an upload within the quota: %v", err)
	}
}

// A kernel of a directory workspace writes no file larger than the quota
// (it had the operator's max_file_size_bytes, 1 GiB in serve.json, while
// fresh runs had what the quota leaves).
func TestKernelFileSizeIsTheQuota(t *testing.T) {
	s := newService(t, Config{WorkspaceQuota: 64 << 20})
	w, _, _ := s.OpenWorkspace(alice, "")
	if got := s.kernelSpec(w.ss, []string{"python3"}, 0).Policy.Limits.MaxFileSizeBytes; got != 64<<20 {
		t.Errorf("a kernel's RLIMIT_FSIZE under a 64 MiB quota: %d", got)
	}
	s = newService(t, Config{WorkspaceQuota: -1}) // none
	w, _, _ = s.OpenWorkspace(alice, "")
	if got, want := s.kernelSpec(w.ss, []string{"python3"}, 0).Policy.Limits.MaxFileSizeBytes, s.Ceiling().Limits.MaxFileSizeBytes; got != want {
		t.Errorf("a kernel's RLIMIT_FSIZE without a quota: %d, want the operator's %d", got, want)
	}
}
