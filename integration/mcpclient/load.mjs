// The load of `srt-mcp bench --load`: N agents, each an unmodified MCP
// TypeScript SDK client with its own MCP session (so its own workspace),
// run cells back to back for a while, each waiting for its reply, and
// check each reply (a counter kept in the workspace's interpreter must go
// up by one: a reply from another workspace, a lost variable or a busy
// session is an error). Prints one JSON line: the calls, the errors (with
// samples), latency percentiles and throughput.
//
//   node load.mjs --url http://127.0.0.1:PORT/mcp --clients 50 --seconds 60 [--token T]
//
// With --command CMD the agents run CMD with execute_code instead (a fresh
// sandbox per call: cold runs), and a reply must be exit 0.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const url = opt("--url");
const clients = Number(opt("--clients", "50"));
const seconds = Number(opt("--seconds", "60"));
const token = opt("--token");
const command = opt("--command");

const latencies = [];
const errors = [];
let calls = 0;

function fail(agent, what) {
  errors.push(`agent ${agent}: ${what}`);
}

async function agent(n, deadline) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: `load-agent-${n}`, version: "1.0.0" }, { capabilities: {} });
  try {
    await client.connect(transport);
  } catch (e) {
    fail(n, `connect: ${e}`);
    return;
  }
  let want = 0;
  while (Date.now() < deadline) {
    want++;
    const start = performance.now();
    let r;
    try {
      const args = command ? { command } : { language: "python", code: "n = globals().get('n', 0) + 1\nn" };
      r = await client.callTool({ name: "execute_code", arguments: args }, undefined, { timeout: 120000 });
    } catch (e) {
      calls++;
      fail(n, `call ${want}: ${e}`);
      break;
    }
    latencies.push(performance.now() - start);
    calls++;
    const sc = r.structuredContent || {};
    if (command) {
      if (r.isError || sc.exit_code !== 0) fail(n, `call ${want}: ${JSON.stringify(sc).slice(0, 300)}`);
      continue;
    }
    if (r.isError || sc.stdout !== `${want}\n`) {
      fail(n, `call ${want}: ${JSON.stringify(sc).slice(0, 300)}`);
      want = Number.parseInt(sc.stdout, 10) || want; // carry on from what the workspace says
    }
  }
  try {
    await transport.terminateSession(); // DELETE: the server closes the workspace
    await client.close();
  } catch (e) {
    fail(n, `close: ${e}`);
  }
}

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : 0);

async function main() {
  const start = Date.now();
  const deadline = start + seconds * 1000;
  await Promise.all(Array.from({ length: clients }, (_, i) => agent(i, deadline)));
  const took = (Date.now() - start) / 1000;
  const sorted = [...latencies].sort((a, b) => a - b);
  console.log(JSON.stringify({
    clients, seconds: took, calls, errors: errors.length, error_samples: errors.slice(0, 10),
    p50_ms: pct(sorted, 50), p90_ms: pct(sorted, 90), p99_ms: pct(sorted, 99), max_ms: sorted[sorted.length - 1] || 0,
    throughput_per_s: calls / took,
    // The CPU the clients themselves used (this Node.js process), seconds.
    client_cpu_s: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
  }));
  process.exit(errors.length ? 1 : 0);
}

main().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e) }));
  process.exit(2);
});
