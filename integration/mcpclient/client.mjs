// Drives srt-mcp with the unmodified MCP TypeScript SDK client and prints
// one JSON line per check: {"check": name, "ok": bool, "detail": ...}.
// Exit status 0 only if every check passed.
//
//   node client.mjs --url http://127.0.0.1:PORT/mcp [--token T]
//   node client.mjs --stdio /path/to/srt-mcp
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const url = opt("--url");
const stdioBin = opt("--stdio");
const token = opt("--token");
const marker = opt("--marker") || "srt-mcp-test-marker";

let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}

async function connect() {
  let transport;
  if (stdioBin) {
    transport = new StdioClientTransport({ command: stdioBin, args: ["serve", "--stdio"], stderr: "inherit" });
  } else {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  }
  const client = new Client({ name: "srt-mcp-integration", version: "1.0.0" }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

const sc = (r) => r.structuredContent || {};
const stdoutOf = (r) => (sc(r).output || []).filter((e) => e.type === "stdout").map((e) => e.data).join("");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --workspaces: a data server's workspace tools, as an agent uses them:
// a named persistent workspace, a snapshot, a change, a restore, a fork.
async function workspaces(client) {
  const call = (name, args) => client.callTool({ name, arguments: args });
  const cell = (session_id, code) => call("execute_code", { session_id, language: "python", code });
  const textOf = (r) => (r.content || []).map((c) => c.text || "").join("\n");
  const name = `ts-${marker}`.slice(0, 60);
  let r = await call("create_session", { language: "python", name, persist: true });
  const sid = sc(r).session_id;
  check("create_session persist", !r.isError && /^sess_/.test(sid || ""), sc(r));
  r = await cell(sid, "open('data.csv','w').write('a,b\\n1,2\\n')\nx = 41");
  check("a cell writes a file", !r.isError, textOf(r));
  r = await call("list_workspaces", {});
  check("list_workspaces shows it", !r.isError && JSON.stringify(sc(r)).includes(name), sc(r));
  r = await call("snapshot_workspace", { session_id: sid, name: "before" });
  const snap = sc(r).snapshot_id;
  check("snapshot_workspace", !r.isError && /^snap_/.test(snap || ""), sc(r));
  r = await cell(sid, "print(x + 1)\n_ = open('data.csv','w').write('changed')");
  check("the interpreter kept its state across the snapshot", !r.isError && (sc(r).stdout || "").trim() === "42", sc(r));
  r = await call("restore_workspace", { session_id: sid, snapshot_id: snap });
  check("restore_workspace says the interpreter restarted", !r.isError && JSON.stringify(sc(r).interpreters_restarted) === '["python"]', sc(r));
  r = await cell(sid, "print(open('data.csv').read().strip())");
  check("the restored file", !r.isError && (sc(r).stdout || "").trim() === "a,b\n1,2", sc(r));
  r = await call("fork_workspace", { snapshot_id: snap });
  const fork = sc(r).session_id;
  check("fork_workspace makes a new session", !r.isError && /^sess_/.test(fork || "") && fork !== sid, sc(r));
  r = await cell(fork, "print(open('data.csv').read().strip())");
  check("the fork holds the snapshot's files", !r.isError && (sc(r).stdout || "").trim() === "a,b\n1,2", sc(r));
  r = await call("restore_workspace", { session_id: sid, snapshot_id: "snap_0000000000000000" });
  check("an unknown snapshot is a clear error", r.isError && /not_found/.test(textOf(r)), textOf(r));
  r = await call("delete_snapshot", { snapshot_id: snap });
  check("delete_snapshot", !r.isError, textOf(r));
  r = await call("close_session", { session_id: fork });
  check("close the fork", !r.isError, textOf(r));
}

async function main() {
  const { client, transport } = await connect();
  check("connect", true, { sessionId: transport.sessionId ?? "stdio", protocol: transport.protocolVersion });
  if (args.includes("--workspaces")) {
    await workspaces(client);
    await client.close();
    return;
  }

  // tools/list: every tool, with input and output schemas.
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  const want = ["cancel_execution", "close_session", "create_session", "delete_snapshot", "destroy_session", "execute_code", "execute_code_async", "fork_workspace", "get_execution_output", "get_execution_status",
    "get_workspace_info", "install_package", "list_artifacts", "list_executions", "list_runtimes", "list_snapshots", "list_workspaces", "read_artifact", "reset_workspace", "restore_workspace", "run_python", "sandbox_list_runners", "sandbox_run_code", "send_stdin", "snapshot_workspace", "upload_file"];
  check("tools/list has the execution, data and workspace tools", JSON.stringify(names) === JSON.stringify(want), names);
  const ex = tools.find((t) => t.name === "execute_code");
  check("execute_code schema", ex && ex.inputSchema.properties.command && ex.inputSchema.properties.code && ex.inputSchema.properties.language && ex.inputSchema.properties.timeout_seconds?.default === 60 && ex.outputSchema, ex?.inputSchema);
  check("annotations", tools.find((t) => t.name === "list_executions")?.annotations?.readOnlyHint === true && !ex?.annotations?.readOnlyHint, ex?.annotations);

  // execute_code, with progress notifications.
  const progress = [];
  let r = await client.callTool(
    { name: "execute_code", arguments: { command: "for i in 1 2 3; do echo line$i; sleep 0.3; done; echo err >&2; exit 4" } },
    undefined,
    { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true, timeout: 60000 },
  );
  check("execute_code result", sc(r).status === "completed" && sc(r).exit_code === 4 && stdoutOf(r) === "line1\nline2\nline3\n", sc(r));
  check("execute_code events", sc(r).output[0].type === "ready" && sc(r).output.at(-1).type === "exit" && sc(r).output.at(-1).code === 4, sc(r).output.map((e) => e.type));
  // Seed 002's example client: json.loads(result.content[0].text), then walk its output events.
  let parsed = null;
  try { parsed = JSON.parse(r.content?.[0]?.text); } catch {}
  check("content[0].text is the result's JSON", r.content?.[0]?.type === "text" && JSON.stringify(parsed) === JSON.stringify(sc(r)) &&
    parsed.output.filter((e) => e.type === "stdout").map((e) => e.data).join("") === "line1\nline2\nline3\n", r.content?.[0]?.text);
  check("progress notifications", progress.length >= 1 && progress.some((p) => (p.message || "").includes("line1")), progress);

  // execute_code_async, then poll with a cursor until done.
  r = await client.callTool({ name: "execute_code_async", arguments: { command: "for i in 1 2 3 4; do echo tick$i; sleep 0.2; done" } });
  const id = sc(r).execution_id;
  check("execute_code_async returns running", sc(r).status === "running" && typeof id === "string" && id.length > 10, sc(r));
  let since = 0, text = "", polls = 0, last;
  for (; polls < 100; polls++) {
    last = await client.callTool({ name: "get_execution_output", arguments: { execution_id: id, since_seq: since, wait: true, wait_for: "output", wait_timeout_seconds: 5 } });
    for (const e of sc(last).output) {
      if (e.seq <= since) throw new Error("cursor returned an old event");
      if (e.type === "stdout") text += e.data;
    }
    since = sc(last).next_seq;
    if (sc(last).status !== "running") break;
  }
  check("async poll with cursor", text === "tick1\ntick2\ntick3\ntick4\n" && sc(last).status === "completed" && polls >= 1, { text, polls });

  // Interactive: a prompt answered by send_stdin.
  r = await client.callTool({ name: "execute_code_async", arguments: { command: "read -p 'name? ' n; echo \"hello $n\"", interactive: true } });
  const iid = sc(r).execution_id;
  await sleep(300);
  const s1 = await client.callTool({ name: "send_stdin", arguments: { execution_id: iid, input_data: "world\n" } });
  const done = await client.callTool({ name: "get_execution_output", arguments: { execution_id: iid, wait: true } });
  check("interactive + send_stdin", !s1.isError && stdoutOf(done).includes("hello world") && sc(done).exit_code === 0, stdoutOf(done));
  const late = await client.callTool({ name: "send_stdin", arguments: { execution_id: iid, input_data: "late\n" } });
  check("send_stdin after exit is an error", late.isError === true && JSON.stringify(late).includes("finished"), late.content?.[0]?.text);

  // Cancel: graceful (the command sees SIGTERM), then force.
  r = await client.callTool({ name: "execute_code_async", arguments: { command: "trap 'echo got-term; exit 7' TERM; echo up; while :; do sleep 0.1; done" } });
  const cid = sc(r).execution_id;
  for (let seen = "", since = 0; !seen.includes("up"); ) {
    const o = await client.callTool({ name: "get_execution_output", arguments: { execution_id: cid, since_seq: since, wait: true, wait_for: "output", wait_timeout_seconds: 5 } });
    seen += stdoutOf(o);
    since = sc(o).next_seq;
  }
  const c1 = await client.callTool({ name: "cancel_execution", arguments: { execution_id: cid } });
  const out1 = await client.callTool({ name: "get_execution_output", arguments: { execution_id: cid } });
  check("cancel (graceful)", sc(c1).status === "cancelled" && stdoutOf(out1).includes("got-term"), { status: sc(c1).status, out: stdoutOf(out1) });
  r = await client.callTool({ name: "execute_code_async", arguments: { command: "trap '' TERM; sleep 60" } });
  const t0 = Date.now();
  const c2 = await client.callTool({ name: "cancel_execution", arguments: { execution_id: sc(r).execution_id, force: true } });
  check("cancel (force)", sc(c2).status === "cancelled" && Date.now() - t0 < 2000, { status: sc(c2).status, ms: Date.now() - t0 });

  // list_executions and get_execution_status.
  const list = await client.callTool({ name: "list_executions", arguments: {} });
  check("list_executions", sc(list).executions.length >= 5 && sc(list).executions.some((e) => e.execution_id === id && e.status === "completed"), sc(list).executions.length);
  const st = await client.callTool({ name: "get_execution_status", arguments: { execution_id: id } });
  check("get_execution_status", sc(st).status === "completed" && sc(st).exit_code === 0 && typeof sc(st).duration_ms === "number", sc(st));

  // Asking for more than the operator's ceiling is refused, naming the entry.
  const wide = await client.callTool({ name: "execute_code", arguments: { command: "true", sandbox_config: { network: { allowed_domains: ["evil.example.com"] } } } });
  check("widening the ceiling is refused", wide.isError === true && JSON.stringify(wide).includes("allowed_domains[0]") && JSON.stringify(wide).includes("evil.example.com"), wide.content?.[0]?.text);
  const wideFs = await client.callTool({ name: "execute_code", arguments: { command: "true", sandbox_config: { filesystem: { allow_write: ["/etc"] } } } });
  check("writable path outside the ceiling is refused", wideFs.isError === true && JSON.stringify(wideFs).includes("allow_write[0]"), wideFs.content?.[0]?.text);

  // Unknown execution ids are errors.
  const nf = await client.callTool({ name: "get_execution_output", arguments: { execution_id: "nope" } });
  check("unknown execution id", nf.isError === true, nf.content?.[0]?.text);

  // A client abort cancels the sandbox.
  const ac = new AbortController();
  const p = client.callTool({ name: "execute_code", arguments: { command: `echo ${marker}-abort; sleep 30` } }, undefined, { signal: ac.signal, timeout: 60000 }).catch((e) => e);
  await sleep(700);
  ac.abort();
  await p;
  await sleep(1500);
  const after = await client.callTool({ name: "list_executions", arguments: {} });
  const aborted = sc(after).executions.find((e) => e.command.includes(`${marker}-abort`));
  check("client abort cancels the run", aborted && aborted.status !== "running", aborted);

  if (!stdioBin) {
    // Another session cannot read, stdin or cancel this session's runs.
    r = await client.callTool({ name: "execute_code_async", arguments: { command: `echo ${marker}-session; sleep 30` } });
    const mine = sc(r).execution_id;
    const other = await connect();
    const o1 = await other.client.callTool({ name: "get_execution_output", arguments: { execution_id: mine } });
    const o2 = await other.client.callTool({ name: "send_stdin", arguments: { execution_id: mine, input_data: "x" } });
    const o3 = await other.client.callTool({ name: "cancel_execution", arguments: { execution_id: mine, force: true } });
    const o4 = await other.client.callTool({ name: "list_executions", arguments: {} });
    check("other session cannot touch", o1.isError && o2.isError && o3.isError && sc(o4).executions.length === 0, [o1, o2, o3].map((x) => x.content?.[0]?.text));
    const stillMine = await client.callTool({ name: "get_execution_status", arguments: { execution_id: mine } });
    check("still running after the other session tried", sc(stillMine).status === "running", sc(stillMine));
    await other.transport.terminateSession();
    await other.client.close();
    // DELETE of this session cancels its executions (the Go test checks
    // that the sandboxed sleep is gone from the host).
    await transport.terminateSession();
    check("session DELETE sent", true, mine);
  }
  await client.close();
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (err) => {
    check("uncaught", false, String(err?.stack || err));
    process.exit(1);
  },
);
