// Two unmodified MCP TypeScript SDK (v2, @modelcontextprotocol/client)
// clients pinned to protocol 2026-07-28 (no MCP session) against srt-mcp:
// state only through handles. One JSON line per check; exit 0 if all pass.
//
//   node modern.mjs --url http://127.0.0.1:PORT/mcp
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const args = process.argv.slice(2);
const url = args[args.indexOf("--url") + 1];
let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}
async function connect(name) {
  const c = new Client({ name, version: "1.0.0" }, { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  await c.listTools(); // the client mirrors x-mcp-header arguments of tools it knows
  return c;
}
const sc = (r) => r.structuredContent || {};
const text = (r) => (r.content || []).map((c) => c.text || "").join("");
try {
  const a = await connect("agent-a");
  const b = await connect("agent-b");
  const r1 = await a.callTool({ name: "execute_code", arguments: { code: "secret = 'A'", language: "python" } });
  const sid = sc(r1).session_id;
  check("a minted handle, and a sentence saying to pass it back", /^sess_/.test(sid || "") && JSON.parse(text(r1)).note.includes(`pass session_id "${sid}"`), { sid, text: text(r1) });
  const r2 = await a.callTool({ name: "execute_code", arguments: { code: "secret", language: "python", session_id: sid } });
  check("the handle keeps the variables", sc(r2).stdout === "'A'\n", sc(r2));
  const r3 = await b.callTool({ name: "execute_code", arguments: { code: "print('secret' in dir())", language: "python" } });
  check("another client without the handle shares nothing", sc(r3).stdout === "False\n" && sc(r3).session_id !== sid, sc(r3));
  const run = await a.callTool({ name: "execute_code_async", arguments: { command: "read line; echo got:$line" } });
  const id = sc(run).execution_id;
  const lb = await b.callTool({ name: "list_executions", arguments: {} });
  check("the other client lists none of it", !JSON.stringify(sc(lb)).includes(id), sc(lb));
  const bad = await a.callTool({ name: "send_stdin", arguments: { execution_id: id, input: "x\n" } });
  check("a misspelt argument is an error naming the right one", bad.isError && text(bad).includes("did you mean input_data?"), text(bad));
  await a.callTool({ name: "send_stdin", arguments: { execution_id: id, input_data: "x\n" } });
  const out = await a.callTool({ name: "get_execution_output", arguments: { execution_id: id, wait: true } });
  check("stdin through the execution handle", JSON.stringify(sc(out).output || []).includes("got:x"), sc(out));
  await a.close();
  await b.close();
} catch (e) {
  check("error", false, String(e?.stack || e));
}
process.exit(failed ? 1 : 0);
