// N unmodified MCP TypeScript SDK clients (protocol 2025-11-25, stateful
// sessions) through a load balancer in front of several srt-mcp replicas.
// Phase 1: each client keeps its variables across cells, feeds stdin to a
// run, cancels a run, and downloads an artifact through the balancer.
// Then it prints {"phase1":"done"} and waits for a line on stdin; phase 2:
// each client runs one more cell (the test kills a replica in between).
// One JSON line per client and phase:
//   {"client":i,"replica":"srt-mcp-1","phase":1,"ok":true,"calls":12}
//   {"client":i,"replica":"srt-mcp-1","phase":2,"ok":false,"error":"..."}
//
//   node replicas.mjs http://127.0.0.1:PORT/mcp N ROUNDS
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createInterface } from "node:readline";

const [url, n = "10", rounds = "5"] = process.argv.slice(2);
const sc = (r) => r.structuredContent || {};
const text = (r) => (r.content || []).map((c) => c.text || "").join("");

async function phase1(i) {
  const client = new Client({ name: `replicas-${i}`, version: "1.0.0" }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  const m = /^mcp-session-(.+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.exec(transport.sessionId || "");
  const st = { i, client, replica: m ? m[1] : `unnamed:${transport.sessionId}`, calls: 0 };
  const call = async (name, args) => {
    st.calls++;
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
    if (r.isError) throw new Error(`${name}: ${text(r)}`);
    return r;
  };
  // Variables persist across cells: the session stays on its replica.
  for (let k = 1; k <= Number(rounds); k++) {
    const r = await call("execute_code", { language: "python", code: "n = globals().get('n', 0) + 1\nprint(n)" });
    if (sc(r).stdout !== `${k}\n`) throw new Error(`cell ${k}: ${JSON.stringify(sc(r))}`);
  }
  // stdin to a running execution.
  let r = await call("execute_code_async", { command: "read line; echo got:$line" });
  const sid = sc(r).execution_id;
  await call("send_stdin", { execution_id: sid, input_data: `client${i}\n` });
  r = await call("get_execution_output", { execution_id: sid, wait: true });
  if (!JSON.stringify(sc(r)).includes(`got:client${i}`)) throw new Error(`stdin: ${JSON.stringify(sc(r))}`);
  // Cancel: SIGTERM reaches the command's trap.
  r = await call("execute_code_async", { command: "trap 'echo got-term; exit 7' TERM; echo up; while :; do sleep 0.1; done" });
  const cid = sc(r).execution_id;
  for (let since = 0, tries = 0; ; tries++) {
    const o = await call("get_execution_output", { execution_id: cid, since_seq: since, wait: true, wait_for: "output", wait_timeout_seconds: 5 });
    if (JSON.stringify(sc(o)).includes("up")) break;
    since = sc(o).next_seq || since;
    if (tries > 20) throw new Error("the cancel target never printed up");
  }
  await call("cancel_execution", { execution_id: cid });
  r = await call("get_execution_output", { execution_id: cid, wait: true });
  if (!JSON.stringify(sc(r)).includes("got-term")) throw new Error(`cancel: ${JSON.stringify(sc(r))}`);
  // An artifact, downloaded through the balancer by its signed URL.
  r = await call("execute_code", { language: "python", code: `open('/mnt/data/out-${i}.txt', 'w').write('client-${i}-' + str(n))` });
  const arts = sc(r).artifacts || [];
  const a = arts.find((x) => (x.filename || x.name || "").includes(`out-${i}.txt`));
  if (!a || !a.download_url) throw new Error(`no artifact: ${JSON.stringify(sc(r))}`);
  const body = await (await fetch(a.download_url)).text();
  if (body !== `client-${i}-${rounds}`) throw new Error(`download ${a.download_url}: ${body}`);
  return st;
}

async function phase2(st) {
  try {
    const r = await st.client.callTool({ name: "execute_code", arguments: { language: "python", code: "print(n)" } }, undefined, { timeout: 60000 });
    if (r.isError) return { ok: false, error: text(r) };
    if (sc(r).stdout !== `${rounds}\n`) return { ok: false, error: `state lost: ${JSON.stringify(sc(r))}` };
    return { ok: true };
  } catch (e) {
    return { ok: false, error: String(e && e.message ? e.message : e) };
  }
}

const started = await Promise.allSettled(Array.from({ length: Number(n) }, (_, i) => phase1(i)));
let failed = 0;
const live = [];
started.forEach((s, i) => {
  if (s.status === "fulfilled") {
    live.push(s.value);
    console.log(JSON.stringify({ client: i, replica: s.value.replica, phase: 1, ok: true, calls: s.value.calls }));
  } else {
    failed++;
    console.log(JSON.stringify({ client: i, phase: 1, ok: false, error: String(s.reason && s.reason.message ? s.reason.message : s.reason) }));
  }
});
console.log(JSON.stringify({ phase1: "done" }));
const rl = createInterface({ input: process.stdin });
await new Promise((resolve) => rl.once("line", resolve));
rl.close();
for (const st of live) {
  const res = await phase2(st);
  console.log(JSON.stringify({ client: st.i, replica: st.replica, phase: 2, ...res }));
}
await Promise.allSettled(live.map((st) => st.client.close()));
process.exit(failed ? 1 : 0);
