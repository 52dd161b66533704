// Drives srt-mcp over MCP's 2024-11-05 HTTP+SSE transport (GET /sse, POST
// /message) with the unmodified MCP TypeScript SDK's SSEClientTransport,
// as some n8n and desktop client versions still do. One JSON line per
// check: {"check": name, "ok": bool, "detail": ...}; exit 0 only if all pass.
//
//   node sse.mjs --url http://127.0.0.1:PORT/sse [--token T]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}

const token = opt("--token");
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new SSEClientTransport(new URL(opt("--url")), {
  requestInit: { headers },
  eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers || {}), ...headers } }) },
});
const client = new Client({ name: "srt-mcp-sse", version: "1.0.0" }, { capabilities: {} });
try {
  await client.connect(transport);
  check("connect", true, { protocol: transport._protocolVersion || "2024-11-05" });
  const tools = await client.listTools();
  const names = tools.tools.map((t) => t.name);
  check("tools/list", names.includes("execute_code") && names.includes("sandbox_run_code") && !names.includes("sandbox.run_code"), names);
  const r = await client.callTool({ name: "execute_code", arguments: { command: "echo over-sse" } });
  const out = (r.structuredContent?.output || []).filter((e) => e.type === "stdout").map((e) => e.data).join("");
  check("execute_code", !r.isError && r.structuredContent?.exit_code === 0 && out === "over-sse\n", r.structuredContent);
  const cell1 = await client.callTool({ name: "execute_code", arguments: { code: "n = 6", language: "python" } });
  const cell2 = await client.callTool({ name: "execute_code", arguments: { code: "n * 7", language: "python" } });
  check("workspace state across calls (one SSE connection is one MCP session)", cell2.structuredContent?.stdout === "42\n" &&
    cell1.structuredContent?.session_id === cell2.structuredContent?.session_id, cell2.structuredContent);
  const rc = await client.callTool({ name: "sandbox.run_code", arguments: { conversationId: "sse-conv", language: "python", code: "print('run_code over sse')" } });
  check("sandbox.run_code", rc.structuredContent?.success === true && rc.structuredContent?.output === "run_code over sse\n", rc.structuredContent);
  await client.close();
} catch (e) {
  check("error", false, String(e?.stack || e));
}
process.exit(failed ? 1 : 0);
