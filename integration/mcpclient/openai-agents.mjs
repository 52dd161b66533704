// Runs the unmodified OpenAI Agents SDK (@openai/agents) against srt-mcp:
// an Agent whose tools come from the SDK's MCPServerStreamableHttp, and
// whose model is a scripted stand-in for OpenAI's Responses API (the SDK's
// default) served by this script on loopback. The stand-in refuses a tool
// name as OpenAI does (HTTP 400 unless ^[a-zA-Z0-9_-]{1,64}$), which is what
// broke agents while srt-mcp listed sandbox.run_code. Prints one JSON line
// per check: {"check": name, "ok": bool, "detail": ...}; exit 0 only if
// every check passed.
//
//   node openai-agents.mjs --mcp http://127.0.0.1:PORT/mcp --want-tools a,b,c
//
// --want-tools is the listing the Go test read with mcp-go: the endpoint
// must see exactly those names.
import http from "node:http";
import OpenAI from "openai";
import { Agent, MCPServerStreamableHttp, OpenAIProvider, Runner, setTracingDisabled } from "@openai/agents";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const mcpURL = opt("--mcp");
const want = (opt("--want-tools") || "").split(",").filter(Boolean).sort();

let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}

// OpenAI's rule for function names (the 400 the Python SDK met).
const namePattern = /^[a-zA-Z0-9_-]{1,64}$/;

// The scripted model. It records what it was sent; it answers like the
// Responses API, and plays a model that follows the tools it was given.
const seen = { requests: 0, refused: [], toolNames: [], outputs: [], calls: [] };
const textOf = (output) =>
  typeof output === "string" ? output : Array.isArray(output) ? output.map((p) => p.text ?? "").join("") : JSON.stringify(output);
const parse = (s) => {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
};
// The stdout events of an execute_code-style reply ("" for any other).
const stdoutOf = (v) => (Array.isArray(v?.output) ? v.output : []).filter((e) => e.type === "stdout").map((e) => e.data).join("");

function respond(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

function modelTurn(req) {
  const tools = req.tools || [];
  const names = tools.map((t) => t.name);
  const bad = names.findIndex((n) => typeof n !== "string" || !namePattern.test(n));
  if (bad >= 0) {
    // OpenAI's wording and shape for this refusal.
    return [400, { error: { message: `Invalid 'tools[${bad}].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`, type: "invalid_request_error", param: `tools[${bad}].name`, code: "invalid_value" } }];
  }
  const input = Array.isArray(req.input) ? req.input : [];
  const outputs = input.filter((i) => i.type === "function_call_output").map((i) => textOf(i.output));
  const n = seen.calls.length;
  let item;
  if (outputs.length === 0 && names.includes("execute_code")) {
    item = { name: "execute_code", arguments: { command: "echo from-openai-agents" } };
  } else if (outputs.length === 1 && names.includes("sandbox_run_code")) {
    item = { name: "sandbox_run_code", arguments: { conversationId: "oa-conv-1", language: "python", code: "print('from-run-code')" } };
  } else if (outputs.length === 1) {
    // Without sandbox_run_code (--tools exec), the model reads the handle
    // out of the first reply and asks for that execution's output again.
    const first = parse(outputs[0]);
    item = { name: "get_execution_output", arguments: { execution_id: first?.execution_id ?? "none" } };
  }
  seen.outputs = outputs;
  seen.rawOutputs = input.filter((i) => i.type === "function_call_output").map((i) => i.output);
  const base = { id: `resp_${seen.requests}`, object: "response", created_at: Math.floor(Date.now() / 1000), status: "completed", model: req.model, error: null, incomplete_details: null,
    usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } } };
  if (item) {
    seen.calls.push(item);
    return [200, { ...base, output: [{ type: "function_call", id: `fc_${n}`, call_id: `call_${n}`, name: item.name, arguments: JSON.stringify(item.arguments), status: "completed" }] }];
  }
  // The final answer repeats what the tools said, as a model would.
  const said = outputs.map((o) => {
    const v = parse(o);
    return stdoutOf(v) || v?.output || o;
  });
  const text = `The tools said: ${said.map((s) => JSON.stringify(s)).join(" and ")}`;
  return [200, { ...base, output: [{ type: "message", id: `msg_${n}`, role: "assistant", status: "completed", content: [{ type: "output_text", text, annotations: [] }] }] }];
}

const api = http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    if (req.method !== "POST" || req.url !== "/v1/responses") return respond(res, 404, { error: { message: `no ${req.method} ${req.url} here` } });
    let r, status, out;
    try {
      r = JSON.parse(body);
      seen.requests++;
      [status, out] = modelTurn(r);
    } catch (e) {
      // A script bug answers 500 (the run then fails) instead of killing node.
      return respond(res, 500, { error: { message: String(e?.stack || e) } });
    }
    if (status !== 200) seen.refused.push(out.error.message);
    else seen.toolNames.push((r.tools || []).map((t) => t.name));
    if (r.stream) return respond(res, 400, { error: { message: "this stand-in does not stream" } });
    respond(res, status, out);
  });
});
await new Promise((ok) => api.listen(0, "127.0.0.1", ok));
const baseURL = `http://127.0.0.1:${api.address().port}/v1`;
setTracingDisabled(true); // no export to api.openai.com

// A unit of the stand-in: the refusal triggers for the names that broke
// agents, through the same openai client the SDK uses. Without this, "the
// endpoint saw every name valid" could pass for a check that never fires.
const raw = new OpenAI({ apiKey: "sk-scripted-test", baseURL, maxRetries: 0 });
for (const bad of ["sandbox.run_code", "x".repeat(65)]) {
  let status, message;
  try {
    await raw.responses.create({ model: "gpt-test", input: "hi", tools: [{ type: "function", name: "ok_tool", parameters: { type: "object", properties: {} }, strict: false }, { type: "function", name: bad, parameters: { type: "object", properties: {} }, strict: false }] });
  } catch (e) {
    status = e?.status;
    message = e?.message;
  }
  check(`the stand-in refuses ${bad.slice(0, 20)} like OpenAI`, status === 400 && /Invalid 'tools\[1\]\.name': string does not match pattern/.test(message || ""), { status, message });
}
seen.requests = 0;
seen.refused = [];

const mcp = new MCPServerStreamableHttp({ url: mcpURL, name: "srt" });
let code = 1;
try {
  await mcp.connect();
  // The names as srt-mcp lists them, before the SDK turns them into
  // function tools (the JS SDK rewrites a dot to "_"; the Python SDK does
  // not, so the listing itself must already be valid).
  const listed = (await mcp.listTools()).map((t) => t.name).sort();
  check("srt-mcp lists only names OpenAI accepts", listed.length > 0 && listed.every((n) => namePattern.test(n)), listed.filter((n) => !namePattern.test(n)));
  check("the SDK lists what mcp-go lists", JSON.stringify(listed) === JSON.stringify(want), { listed, want });

  const agent = new Agent({
    name: "sandbox agent",
    instructions: "Run code in the sandbox with the tools you have.",
    model: "gpt-test",
    mcpServers: [mcp],
  });
  const runner = new Runner({ modelProvider: new OpenAIProvider({ apiKey: "sk-scripted-test", baseURL }), tracingDisabled: true });
  const result = await runner.run(agent, "Echo something in the sandbox, then run some Python.", { maxTurns: 6 });
  const final = String(result.finalOutput ?? "");

  check("the model endpoint never refused the tools", seen.refused.length === 0, seen.refused);
  check("the agent made 3 model requests (2 tool calls, 1 answer)", seen.requests === 3 && seen.calls.length === 2, { requests: seen.requests, calls: seen.calls });
  const sent = seen.toolNames.flat();
  check("every name the endpoint saw matches the pattern", sent.length > 0 && sent.every((n) => namePattern.test(n)), sent.filter((n) => !namePattern.test(n)));
  check("the endpoint saw exactly the listed tools", seen.toolNames.every((ns) => JSON.stringify([...ns].sort()) === JSON.stringify(want)), { sent: seen.toolNames[0], want });

  // What the model received: function_call_output items that are JSON.
  const [o1, o2] = seen.outputs.map(parse);
  check("execute_code's output reached the model as JSON", seen.outputs.length === 2 && o1 !== undefined, seen.rawOutputs?.[0]);
  check("execute_code's JSON has the stdout", stdoutOf(o1) === "from-openai-agents\n" && o1?.status === "completed" && o1?.exit_code === 0, o1);
  if (seen.calls[1]?.name === "sandbox_run_code") {
    check("sandbox_run_code's output reached the model as JSON", o2?.success === true && o2?.output === "from-run-code\n", seen.outputs[1]);
  } else {
    check("get_execution_output's output reached the model as JSON", o2?.execution_id === o1?.execution_id && stdoutOf(o2) === "from-openai-agents\n", seen.outputs[1]);
  }
  check("the run completed with what the tools said", final.includes('"from-openai-agents\\n"') && (final.includes("from-run-code") || final.split("from-openai-agents").length === 3), final);
  code = failed === 0 ? 0 : 1;
} catch (e) {
  check("the agent ran", false, String(e?.stack || e));
} finally {
  await mcp.close().catch(() => {});
  api.close();
}
process.exit(code);
