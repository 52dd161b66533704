// mcp-remote 0.15.1 (unmodified, from npm), the stdio-to-HTTP bridge many
// desktop hosts run, in front of srt-mcp, driven over stdio by the MCP
// TypeScript SDK v2 pinned to 2026-07-28 (a host that speaks it). The
// bridge then speaks 2026-07-28 to the server but forwards calls without
// their Mcp-Param-* headers: the server serves those from the body, so the
// handles it mints work through it. One JSON line per check; exit 0 if all
// pass.
//
//   node remote.mjs --url http://127.0.0.1:PORT/mcp [--token TOKEN]
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createRequire } from "node:module";
import path from "node:path";

const args = process.argv.slice(2);
const url = args[args.indexOf("--url") + 1];
const token = args.includes("--token") ? args[args.indexOf("--token") + 1] : "";
let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}
const require = createRequire(import.meta.url);
const proxy = path.join(path.dirname(require.resolve("mcp-remote/package.json")), "dist", "proxy.js");
const sc = (r) => r.structuredContent || {};
const text = (r) => (r.content || []).map((c) => c.text || "").join("");
try {
  const bridgeArgs = [proxy, url, "--transport", "http-only", "--allow-http"];
  if (token) bridgeArgs.push("--header", `Authorization:Bearer ${token}`);
  const transport = new StdioClientTransport({ command: process.execPath, args: bridgeArgs, stderr: "pipe" });
  let bridgeLog = "";
  transport.stderr?.on("data", (d) => { bridgeLog += d; });
  const c = new Client({ name: "remote-check", version: "1.0.0" }, { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await c.connect(transport);
  const r1 = await c.callTool({ name: "execute_code", arguments: { code: "x = 41", language: "python" } });
  const sid = sc(r1).session_id;
  check("a workspace through the bridge", !r1.isError && /^sess_/.test(sid || ""), { r1: sc(r1), text: text(r1), bridgeLog: bridgeLog.slice(-2000) });
  const r2 = await c.callTool({ name: "execute_code", arguments: { code: "x + 1", language: "python", session_id: sid } });
  check("its handle works without Mcp-Param-Session-Id", !r2.isError && sc(r2).stdout === "42\n", { r2: sc(r2), text: text(r2), bridgeLog: bridgeLog.slice(-2000) });
  const run = await c.callTool({ name: "execute_code_async", arguments: { command: "echo from-async" } });
  const id = sc(run).execution_id;
  const out = await c.callTool({ name: "get_execution_output", arguments: { execution_id: id, wait: true } });
  check("an execution_id works without Mcp-Param-Execution-Id", !out.isError && JSON.stringify(sc(out).output || []).includes("from-async"), { out: sc(out), text: text(out) });
  await c.close();
} catch (e) {
  check("error", false, String(e?.stack || e));
}
process.exit(failed ? 1 : 0);
