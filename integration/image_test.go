package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The server image (deploy/Dockerfile), built registry-free on the
// debootstrapped data image as make server-image does, runs srt-mcp serve
// with bubblewrap as an unprivileged user with the documented options and
// nothing more (no --privileged, no capability); the real MCP TypeScript
// client and both LibreChat clients pass their flows against it. Without
// the options, srt-mcp doctor in the image names each one that is missing.
func TestServerImage(t *testing.T) {
	if os.Geteuid() != 0 || exec.Command("docker", "image", "inspect", dockerImage).Run() != nil {
		if os.Getenv("SRT_MCP_DOCKER") == "1" {
			t.Fatal("the server image test needs root, a Docker engine and the data image (make image)")
		}
		t.Skip("needs root, a Docker engine and the data image")
	}
	dir := mcpClients(t)
	const tag = "srt-mcp-server:itest"
	ctxDir := t.TempDir()
	bin, err := os.ReadFile(nwBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "srt-mcp"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("docker", "build", "-q", "-f", deployFile(t, "Dockerfile"), "--build-arg", "BASE="+dockerImage, "-t", tag, ctxDir)
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", tag).Run() })

	// Without the options: doctor says what is missing, and how to lift it.
	out, err := exec.Command("docker", "run", "--rm", tag, "doctor").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--security-opt seccomp=unconfined") || !strings.Contains(string(out), "--security-opt systempaths=unconfined") {
		t.Fatalf("doctor in a default container: want a failure naming the options, got %v\n%s", err, out)
	}

	// With them: the server, as the image's unprivileged user.
	pemFile, mint, priv := lcKeys(t)
	port := freePort(t)
	name := fmt.Sprintf("srt-mcp-itest-%d", port)
	const token = "image-test-token"
	run := exec.Command("docker", "run", "-d", "--name", name, "-p", fmt.Sprintf("127.0.0.1:%d:8080", port),
		"-e", "SANDBOX_AUTH_TOKEN="+token, "-e", "PUBLIC_BASE_URL="+fmt.Sprintf("http://127.0.0.1:%d", port),
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined",
		"-v", filepath.Dir(pemFile)+":/keys:ro", tag,
		"serve", "--host", "0.0.0.0", "--port", "8080", "--state-dir", "/var/lib/srt-mcp/state",
		"--librechat-api-key", lcKey, "--librechat-jwt-public-key", "/keys/"+filepath.Base(pemFile))
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("server logs:\n%s", logs)
		}
		_ = exec.Command("docker", "rm", "-f", name).Run()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server in the image never became ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var inspect []struct {
		Config     struct{ User string }
		HostConfig struct {
			Privileged bool
			CapAdd     []string
		}
	}
	raw, _ := exec.Command("docker", "inspect", name).Output()
	if json.Unmarshal(raw, &inspect) != nil || len(inspect) != 1 || inspect[0].HostConfig.Privileged || len(inspect[0].HostConfig.CapAdd) > 0 || inspect[0].Config.User != "10001:10001" {
		t.Fatalf("the container must run unprivileged as 10001 with no added capability: %s", raw)
	}
	if out, _ := exec.Command("docker", "exec", name, "id", "-u").Output(); strings.TrimSpace(string(out)) != "10001" {
		t.Fatalf("the server runs as uid %q", out)
	}

	// The real clients' flows.
	runClient(t, dir, "--url", base+"/mcp", "--token", token)
	for _, gen := range []string{"modern", "legacy"} {
		runLibreChatClient(t, dir, gen, base+"/v1/librechat", mint("65f0c0ffee0000000000user", priv))
	}

	// deploy/compose.yaml: the srt-mcp service comes up healthy (its
	// healthcheck is /readyz) and LibreChat's client works through it.
	t.Run("compose", func(t *testing.T) {
		if exec.Command("docker", "compose", "version").Run() != nil {
			if os.Getenv("SRT_MCP_DOCKER") == "1" {
				t.Fatal("Docker Compose v2 is not installed (scripts/compose-plugin.sh)")
			}
			t.Skip("no Docker Compose v2")
		}
		cport := freePort(t)
		project := fmt.Sprintf("srtmcpitest%d", cport)
		env := append(os.Environ(), "SRT_MCP_IMAGE="+tag, "LIBRECHAT_CODE_API_KEY="+lcKey, "SANDBOX_AUTH_TOKEN="+token,
			fmt.Sprintf("SRT_MCP_PORT=%d", cport), fmt.Sprintf("SRT_MCP_PUBLIC_URL=http://127.0.0.1:%d", cport))
		compose := func(args ...string) ([]byte, error) {
			cmd := exec.Command("docker", append([]string{"compose", "-p", project, "-f", deployFile(t, "compose.yaml")}, args...)...)
			cmd.Env = env
			return cmd.CombinedOutput()
		}
		if out, err := compose("up", "-d", "srt-mcp"); err != nil {
			t.Fatalf("docker compose up: %v\n%s", err, out)
		}
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := compose("logs", "srt-mcp")
				t.Logf("compose logs:\n%s", out)
			}
			_, _ = compose("down", "-v")
		})
		id, _ := compose("ps", "-q", "srt-mcp")
		deadline := time.Now().Add(90 * time.Second)
		for {
			st, _ := exec.Command("docker", "inspect", "-f", "{{.State.Health.Status}}", strings.TrimSpace(string(id))).Output()
			if strings.TrimSpace(string(st)) == "healthy" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the compose service never became healthy (%s)", st)
			}
			time.Sleep(500 * time.Millisecond)
		}
		runLibreChatClient(t, dir, "legacy", fmt.Sprintf("http://127.0.0.1:%d/v1/librechat", cport), "")
	})

	// docker stop drains: SIGTERM, and the server exits by itself.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "stop", "-t", "40", name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v %s", err, out)
	}
	logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
	if !strings.Contains(string(logs), "draining") {
		t.Errorf("docker stop did not drain the server:\n%s", logs)
	}
}
