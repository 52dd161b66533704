// Runs the unmodified Claude Agent SDK (which runs Claude Code) against
// srt-mcp over Streamable HTTP, with ANTHROPIC_BASE_URL pointing at a
// scripted stand-in for the Messages API that the Go test serves on
// loopback. Prints every SDK message as one JSON line.
//
//   node agent.mjs --mcp http://127.0.0.1:PORT/mcp --api http://127.0.0.1:PORT2 [--token T]
import { query } from "@anthropic-ai/claude-agent-sdk";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const token = opt("--token");
const server = { type: "http", url: opt("--mcp") };
if (token) server.headers = { Authorization: `Bearer ${token}` };

let code = 1;
try {
  for await (const m of query({
    prompt: "In the sandbox, set x = 41 in Python, then in a second call print x + 1.",
    options: {
      mcpServers: { srt: server },
      allowedTools: ["mcp__srt__execute_code"],
      model: "claude-sonnet-4-5",
      maxTurns: 6,
      env: {
        ...process.env,
        ANTHROPIC_BASE_URL: opt("--api"),
        ANTHROPIC_API_KEY: "sk-ant-scripted-test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_AUTOUPDATER: "1",
        ENABLE_TOOL_SEARCH: "false", // every tool in the request, as a small tool set is
      },
      stderr: (d) => process.stderr.write(d),
    },
  })) {
    console.log(JSON.stringify(m));
    if (m.type === "result") code = m.is_error ? 1 : 0;
  }
} catch (e) {
  console.error(String(e?.stack || e));
}
process.exit(code);
