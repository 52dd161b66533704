//go:build !embedserver

package main

import (
	"bufio"
	"os"
	"strings"
)

// containerState is what a container runtime does that stops bubblewrap:
// its seccomp profile (refuses unshare, mount, pivot_root), masked /proc
// paths (a new /proc cannot be mounted in a user namespace while any path
// of the old one is over-mounted) and an AppArmor profile (refuses mount).
type containerState struct {
	in        bool
	seccomp   bool     // a seccomp filter is on this process
	masked    []string // over-mounted paths under /proc
	apparmor  string   // the AppArmor profile, "" when unconfined or none
	runtimeIs string   // "Kubernetes", "Docker" or "a container"
}

func inspectContainer() containerState {
	var c containerState
	switch {
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		c.in, c.runtimeIs = true, "Kubernetes"
	case fileExists("/.dockerenv"):
		c.in, c.runtimeIs = true, "Docker"
	case fileExists("/run/.containerenv"):
		c.in, c.runtimeIs = true, "a container (Podman)"
	default:
		if b, err := os.ReadFile("/proc/1/cgroup"); err == nil &&
			(strings.Contains(string(b), "docker") || strings.Contains(string(b), "kubepods") || strings.Contains(string(b), "containerd")) {
			c.in, c.runtimeIs = true, "a container"
		}
	}
	mode, _ := selfStatus("Seccomp")
	c.seccomp = mode == "2"
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 4 && strings.HasPrefix(fields[4], "/proc/") {
				c.masked = append(c.masked, fields[4])
			}
		}
		f.Close()
	}
	for _, p := range []string{"/proc/self/attr/apparmor/current", "/proc/self/attr/current"} {
		if b, err := os.ReadFile(p); err == nil {
			if prof := strings.TrimSpace(strings.TrimRight(string(b), "\x00")); prof != "" && prof != "unconfined" {
				c.apparmor = prof
			}
			break
		}
	}
	return c
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// containerChecks reports, inside a container, each runtime setting that
// keeps bubblewrap from working, with the option that lifts it.
func containerChecks() []check {
	c := inspectContainer()
	if !c.in {
		return nil
	}
	var out []check
	k8s := c.runtimeIs == "Kubernetes"
	if c.seccomp {
		fix := "docker run --security-opt seccomp=unconfined (or a profile that allows unshare, mount, umount2, pivot_root, setns); srt-mcp applies its own filter to every sandboxed command"
		if k8s {
			fix = "securityContext.seccompProfile.type: Unconfined (or a Localhost profile that allows unshare, mount, umount2, pivot_root, setns)"
		}
		out = append(out, check{Name: "container seccomp", Status: "warn", Detail: "the runtime's seccomp profile is on; the default one refuses the user namespaces and mounts bubblewrap needs", Fix: fix})
	}
	if len(c.masked) > 0 {
		fix := "docker run --security-opt systempaths=unconfined"
		if k8s {
			fix = "spec.hostUsers: false with securityContext.procMount: Unmasked"
		}
		shown := c.masked
		if len(shown) > 4 {
			shown = append(shown[:4:4], "...")
		}
		out = append(out, check{Name: "container /proc", Status: "warn", Detail: "paths of /proc are masked (" + strings.Join(shown, " ") + "): bubblewrap cannot mount the sandbox's own /proc", Fix: fix})
	}
	if c.apparmor != "" {
		fix := "docker run --security-opt apparmor=unconfined"
		if k8s {
			fix = "securityContext.appArmorProfile.type: Unconfined"
		}
		out = append(out, check{Name: "container AppArmor", Status: "warn", Detail: "AppArmor profile " + c.apparmor + " refuses the mounts bubblewrap makes", Fix: fix})
	}
	if len(out) == 0 {
		out = append(out, check{Name: "container", Status: "ok", Detail: "in " + c.runtimeIs + ": no seccomp profile, /proc unmasked, no AppArmor profile in the way"})
	}
	return out
}
