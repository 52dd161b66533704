package integration

// The LangChain.js MCP adapters (npm @langchain/mcp-adapters, installed in
// mcpclient/langchain because they need @langchain/core 1.x) load
// srt-mcp's tools and invoke execute_code as a LangChain agent does; the
// ToolMessage the model is handed must carry the reply's JSON.

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestLangChainMCPAdapters(t *testing.T) {
	parallel(t)
	dir := filepath.Join(mcpClients(t), "langchain")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "mcp-adapters")); err != nil {
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
			t.Fatal("@langchain/mcp-adapters is not installed in " + dir)
		}
		t.Skip("@langchain/mcp-adapters is not installed")
	}
	s := startServe(t, "--backend", "native")
	cmd := exec.Command("node", "langchain.mjs", "--mcp", s.url)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+reachableTempDir(t))
	out, stderr, err := runNode(t, cmd, 2*time.Minute)
	if checks := nodeChecks(t, "langchain", out); err != nil || checks < 5 {
		t.Fatalf("langchain.mjs: %v (%d checks)\n%s\nstderr: %s", err, checks, out, stderr)
	}
}
