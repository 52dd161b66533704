package runner

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenPlans are fixed, host-independent plans covering every mount kind.
var goldenPlans = map[string]*Plan{
	"minimal": {
		Cwd: "/home/u/proj",
		Mounts: []Mount{
			{Kind: MountSymlink, Src: "usr/bin", Dst: "/bin"},
			{Kind: MountDev, Dst: "/dev"},
			{Kind: MountRO, Src: "/var/cache/srt-mcp/etc", Dst: "/etc"},
			{Kind: MountProc, Dst: "/proc"},
			{Kind: MountTmpfs, Dst: "/tmp", Size: 536870912},
			{Kind: MountRO, Src: "/usr", Dst: "/usr"},
			{Kind: MountTmpfs, Dst: "/dev/shm", Size: 536870912},
			{Kind: MountDir, Dst: "/tmp/home"},
			{Kind: MountRO, Src: "/proc/sys", Dst: "/proc/sys", System: true},
			{Kind: MountHideFile, Dst: "/proc/kcore"},
			{Kind: MountRO, Src: "/home/u/proj", Dst: "/home/u/proj"},
			{Kind: MountRemountRO, Dst: "/dev"},
			{Kind: MountRemountRO, Dst: "/"},
		},
	},
	"policy": {
		Cwd: "/home/u/proj",
		Mounts: []Mount{
			{Kind: MountRO, Src: "/usr", Dst: "/usr"},
			{Kind: MountRW, Src: "/home/u/proj", Dst: "/home/u/proj"},
			{Kind: MountTmpfs, Dst: "/home/u/proj/vault", Size: 4096},
			{Kind: MountHideFile, Dst: "/home/u/proj/.env"},
			{Kind: MountRO, Src: "/home/u/proj/.bashrc", Dst: "/home/u/proj/.bashrc"},
			{Kind: MountRW, Src: "/home/u/proj/.git", Dst: "/home/u/proj/.git"},
			{Kind: MountRO, Src: "/home/u/proj/.git/hooks", Dst: "/home/u/proj/.git/hooks"},
			{Kind: MountRO, Src: "/home/u/proj/vault/public", Dst: "/home/u/proj/vault/public"},
			{Kind: MountRemountRO, Dst: "/home/u/proj/vault"},
			{Kind: MountRemountRO, Dst: "/"},
		},
		Protected: []string{"/home/u/proj/.bashrc", "/home/u/proj/.git/hooks"},
	},
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./runner -run Golden -update)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGoldenBwrapArgs(t *testing.T) {
	for name, plan := range goldenPlans {
		for _, asPID1 := range []bool{false, true} {
			suffix := ""
			if asPID1 {
				suffix = "-pid1"
			}
			args := BwrapArgs(plan, BwrapOptions{JSONStatusFD: 5, Command: []string{sandboxSelf, ModeExec}, AsPID1: asPID1})
			checkGolden(t, name+suffix+".bwrap", strings.Join(args, "\n")+"\n")
		}
		// As the runner starts it: every bind source but /proc's by
		// descriptor, so no host path is on the command line.
		fds := map[int]int{}
		for i, m := range plan.Mounts {
			if (m.Kind == MountRO || m.Kind == MountRW) && !strings.HasPrefix(m.Src, "/proc/") {
				fds[i] = fdFirstMount + len(fds)
			}
		}
		args := BwrapArgs(plan, BwrapOptions{JSONStatusFD: 5, Command: []string{sandboxSelf, ModeExec}, SourceFDs: fds})
		checkGolden(t, name+"-fds.bwrap", strings.Join(args, "\n")+"\n")
		for i := 0; i < len(args)-1; i++ {
			if (args[i] == "--bind" || args[i] == "--ro-bind") && !strings.HasPrefix(args[i+1], "/proc/") && args[i+1] != "/dev/null" {
				t.Errorf("%s %s: a source by path", args[i], args[i+1])
			}
		}
	}
}

func TestGoldenSeatbelt(t *testing.T) {
	const tmp = "/private/var/folders/xy/T/srt-mcp-1"
	for name, plan := range goldenPlans {
		// No allow-list: no network at all.
		checkGolden(t, name+".sb", SeatbeltProfile(plan, SeatbeltOptions{TmpDir: tmp}))
	}
	// An allow-list: the proxy's HTTP and SOCKS5 ports on loopback, as
	// loopbackListeners returns them, and nothing else.
	checkGolden(t, "policy-network.sb", SeatbeltProfile(goldenPlans["policy"], SeatbeltOptions{TmpDir: tmp, ProxyPorts: []int{49152, 49153}}))
}

// TestBwrapPosture pins the non-negotiable options independent of goldens.
func TestBwrapPosture(t *testing.T) {
	args := strings.Join(BwrapArgs(goldenPlans["minimal"], BwrapOptions{Command: []string{"x"}}), " ")
	for _, want := range []string{"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
		"--unshare-cgroup", "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop ALL", "--remount-ro /"} {
		if !strings.Contains(args, want) {
			t.Errorf("bwrap argv lacks %q", want)
		}
	}
	if strings.Contains(args, "--ro-bind / /") || strings.Contains(args, "--bind / /") {
		t.Error("the host root must not be bound")
	}
}
