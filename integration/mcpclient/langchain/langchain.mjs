// Loads srt-mcp's tools with the unmodified LangChain.js MCP adapters
// (@langchain/mcp-adapters) and invokes execute_code as a LangChain agent
// does: with a tool call, getting back the ToolMessage the model is handed.
// Prints one JSON line per check: {"check": name, "ok": bool, "detail": ...};
// exit 0 only if every check passed.
//
//   node langchain/langchain.mjs --mcp http://127.0.0.1:PORT/mcp
import { MultiServerMCPClient } from "@langchain/mcp-adapters";

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
const parse = (s) => {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
};
const namePattern = /^[a-zA-Z0-9_-]{1,64}$/;
// The model-visible text of a ToolMessage's content (a string or blocks).
const textOf = (content) =>
  typeof content === "string" ? content : (Array.isArray(content) ? content : [content]).map((b) => (typeof b === "string" ? b : b?.text ?? "")).join("");

const client = new MultiServerMCPClient({ mcpServers: { srt: { transport: "http", url: opt("--mcp") } }, throwOnLoadError: true });
let code = 1;
try {
  const tools = await client.getTools();
  const names = tools.map((t) => t.name);
  // LangChain passes the names on to the model provider as they are.
  check("the adapters load srt-mcp's tools, every name one OpenAI accepts", names.includes("execute_code") && names.every((n) => namePattern.test(n)), names);

  const exec = tools.find((t) => t.name === "execute_code");
  const msg = await exec.invoke({ name: "execute_code", args: { command: "echo from-langchain" }, id: "call_1", type: "tool_call" });
  check("invoking a tool call gives a ToolMessage", msg?.constructor?.name === "ToolMessage" && msg.tool_call_id === "call_1", msg);
  // What the model is handed. Adapters 1.1.4 return a text block that also
  // carries structuredContent, and ToolMessage serializes that object to a
  // string: the model sees {"type":"text","text":"<our JSON>",
  // "structuredContent":{...}}, the output twice. Read our JSON out of
  // either shape.
  const seen = textOf(msg.content);
  const wrapped = parse(seen);
  const text = wrapped?.type === "text" && typeof wrapped.text === "string" ? wrapped.text : seen;
  const v = parse(text);
  const stdout = (Array.isArray(v?.output) ? v.output : []).filter((e) => e.type === "stdout").map((e) => e.data).join("");
  check("the text the model is handed carries the reply's JSON", v?.status === "completed" && v?.exit_code === 0 && stdout === "from-langchain\n",
    { modelChars: seen.length, replyChars: text.length, wrapped: wrapped?.type === "text", content: msg.content });
  const structured = (msg.artifact || []).find((a) => a.type === "mcp_structured_content")?.data;
  check("that JSON is structuredContent", structured !== undefined && JSON.stringify(v) === JSON.stringify(structured), { structured, v });

  // A 200 KB stdout: what reaches the model is the cut reply (and, as
  // above, how many characters the model is handed for it).
  const big = await exec.invoke({ name: "execute_code", args: { command: "seq -f '%07g' 1 25000" }, id: "call_2", type: "tool_call" });
  const bigSeen = textOf(big.content);
  const bigText = parse(bigSeen)?.text ?? bigSeen;
  const bv = parse(bigText);
  check("a 200 KB stdout reaches the model cut", typeof bv?.cut === "string" && bigText.length <= 45000, { modelChars: bigSeen.length, replyChars: bigText.length, cut: bv?.cut });
  code = failed === 0 ? 0 : 1;
} catch (e) {
  check("the adapters ran", false, String(e?.stack || e));
} finally {
  await client.close().catch(() => {});
}
process.exit(code);
