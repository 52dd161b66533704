// MCP tasks (2025-11-25) through the unmodified TypeScript SDK v1 client's
// experimental task API (client.experimental.tasks: callToolStream,
// getTask, getTaskResult, listTasks, cancelTask) against srt-mcp.
// One JSON line per check; exit 0 if all pass.
//
//   node tasks.mjs --url http://127.0.0.1:PORT/mcp --marker UNIQUE
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const args = process.argv.slice(2);
const url = args[args.indexOf("--url") + 1];
const marker = args[args.indexOf("--marker") + 1];
let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}
async function connect(name, capabilities) {
  const c = new Client({ name, version: "1.0.0" }, { capabilities });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  await c.listTools(); // the client learns which tools may run as tasks
  return c;
}
// stream runs a tool through callToolStream and returns what it yielded.
async function stream(c, name, args, onCreated) {
  const seen = { statuses: [] };
  for await (const m of c.experimental.tasks.callToolStream({ name, arguments: args }, undefined, { task: { ttl: 600000 } })) {
    if (m.type === "taskCreated") {
      seen.task = m.task;
      if (onCreated) await onCreated(m.task);
    } else if (m.type === "taskStatus") {
      seen.statuses.push(m.task.status);
    } else if (m.type === "result") {
      seen.result = m.result;
    } else if (m.type === "error") {
      seen.error = String(m.error?.message || m.error);
    }
  }
  return seen;
}
const sc = (r) => r?.structuredContent || {};
try {
  const c = await connect("tasks-client", { tasks: { list: {}, cancel: {} } });
  check("tools/call tasks offered", !!c.getServerCapabilities()?.tasks?.requests?.tools?.call, c.getServerCapabilities());
  check("execute_code and run_python may run as tasks, others not",
    c.isToolTask("execute_code") && c.isToolTask("run_python") && !c.isToolTask("list_executions"), {});

  const run = await stream(c, "execute_code", { command: "sleep 1; echo ts-task-output" });
  check("execute_code as a task: the task id is the execution id",
    run.task && sc(run.result).execution_id === run.task.taskId, { task: run.task, result: sc(run.result) });
  check("working, then completed", run.statuses[0] === "working" && run.statuses.at(-1) === "completed", run.statuses);
  check("the result is the command's", JSON.stringify(sc(run.result).output || []).includes("ts-task-output"), sc(run.result));

  const py = await stream(c, "run_python", { code: "print(6 * 7)" });
  check("run_python as a task", py.task && sc(py.result).stdout === "42\n" && sc(py.result).exit_code === 0, { py });

  const slow = await stream(c, "execute_code", { command: "sleep 30", timeout_seconds: 1 });
  check("a timeout fails the task", slow.statuses.at(-1) === "failed" && /failed/.test(slow.error || ""), slow);
  const slowResult = await c.experimental.tasks.getTaskResult(slow.task.taskId, CallToolResultSchema);
  check("tasks/result of a timeout is the timed-out reply", sc(slowResult).status === "timed_out", sc(slowResult));

  let cancelled;
  const long = await stream(c, "execute_code", { command: `sh -c 'sleep 300; :' ${marker}`, timeout_seconds: 280 }, async (task) => {
    await new Promise((r) => setTimeout(r, 1000));
    cancelled = await c.experimental.tasks.cancelTask(task.taskId);
  });
  check("tasks/cancel answers cancelled", cancelled?.status === "cancelled", cancelled);
  check("the stream ends cancelled", /cancelled/.test(long.error || ""), long);
  const after = await c.experimental.tasks.getTask(long.task.taskId);
  check("tasks/get after the cancel", after.status === "cancelled", after);

  const listed = await c.experimental.tasks.listTasks();
  const ids = (listed.tasks || []).map((t) => t.taskId);
  check("tasks/list has this session's tasks", [run, py, slow, long].every((s) => ids.includes(s.task.taskId)), ids);

  const plain = await connect("plain-client", {});
  check("a client without tasks is offered none", !plain.getServerCapabilities()?.tasks && !plain.isToolTask("execute_code"), plain.getServerCapabilities());
  const direct = await plain.callTool({ name: "execute_code", arguments: { command: "echo plain" } });
  check("and gets the plain reply", sc(direct).status === "completed", sc(direct));
  const other = await plain.experimental.tasks.getTask(run.task.taskId).then(() => "found", (e) => String(e.message));
  check("a session without tasks cannot reach the task", other !== "found", other);
  await c.close();
  await plain.close();
} catch (e) {
  check("error", false, String(e?.stack || e));
}
process.exit(failed ? 1 : 0);
