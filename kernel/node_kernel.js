// srt-mcp's JavaScript kernel: one long-lived Node.js context per
// workspace, driven over pipes (see kernel.go for the protocol). Frames go
// out on stdout prefixed with \x1e; anything else on stdout (a child
// process writing directly) is the current cell's output.
'use strict';
const vm = require('vm');
const util = require('util');
const fs = require('fs');
const readline = require('readline');

const RS = '\x1e';
function send(m) {
  fs.writeSync(1, RS + JSON.stringify(m) + '\n');
}

let cell = 0;
let execCount = 0;
const loaded = new Set();
const out = (ev) => (chunk, enc, cb) => {
  send({ id: cell, ev, data: typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8') });
  if (typeof enc === 'function') enc();
  else if (typeof cb === 'function') cb();
  return true;
};
process.stdout.write = out('stdout');
process.stderr.write = out('stderr');

const realRequire = require; // in node -e, require is a global: keep the real one
function userRequire(name) {
  const m = realRequire(name);
  loaded.add(name);
  return m;
}
userRequire.resolve = realRequire.resolve;

// Cells run in this context, as scripts: var and let/const declarations
// persist between them. What is global now is not the user's.
const inspector = require('inspector');
const insp = new inspector.Session();
insp.connect();
function lexicalNames() {
  let names = [];
  insp.post('Runtime.globalLexicalScopeNames', {}, (err, res) => { if (!err) names = res.names; });
  return names;
}
globalThis.require = userRequire;
globalThis.module = { exports: {} };
const startProps = new Set(Object.getOwnPropertyNames(globalThis));
const startLexical = new Set(lexicalNames()); // the kernel's own top-level names

async function runCell(id, code) {
  execCount++;
  let ok = true;
  try {
    let value = new vm.Script(code, { filename: `<cell ${execCount}>` }).runInThisContext({ breakOnSigint: true });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) {
      send({ id, ev: 'result', repr: util.inspect(value, { depth: 4, breakLength: 100 }) });
    }
  } catch (e) {
    ok = false;
    const text = (e && e.stack) ? String(e.stack) : String(e);
    send({ id, ev: 'stderr', data: text.replace(/\n\s+at [^\n]*node:vm[^\n]*[\s\S]*$/, '') + '\n' });
    send({ id, ev: 'error', ename: (e && e.name) || 'Error', evalue: (e && e.message) || String(e) });
  }
  send({ id, ev: 'done', ok, exec_count: execCount });
}

function info(id) {
  // Real introspection: the global object's own properties and V8's list
  // of global lexical (let/const/class) names, less what was there at start.
  const names = new Set([
    ...Object.getOwnPropertyNames(globalThis).filter((k) => !startProps.has(k)),
    ...lexicalNames().filter((k) => !startLexical.has(k)),
  ]);
  const variables = [...names].filter((k) => !k.startsWith('_')).sort();
  send({ id, ev: 'info', variables, modules: [...loaded].sort(), exec_count: execCount, memory_bytes: process.memoryUsage().rss });
  send({ id, ev: 'done', ok: true, exec_count: execCount });
}

process.on('SIGINT', () => {}); // between cells an interrupt is nothing to stop
process.on('uncaughtException', (e) => {
  send({ id: cell, ev: 'stderr', data: 'Uncaught ' + ((e && e.stack) || String(e)) + '\n' });
});
process.on('unhandledRejection', (e) => {
  send({ id: cell, ev: 'stderr', data: 'Unhandled rejection: ' + ((e && e.stack) || String(e)) + '\n' });
});

const queue = [];
let busy = false;
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const req = queue.shift();
    cell = req.id || 0;
    if (req.op === 'exec') await runCell(cell, String(req.code || ''));
    else if (req.op === 'info') info(cell);
    else if (req.op === 'preload') {
      for (const m of req.modules || []) { try { realRequire(m); } catch (e) { /* not installed */ } }
      send({ id: cell, ev: 'done', ok: true, exec_count: execCount });
    }
  }
  busy = false;
}

readline.createInterface({ input: process.stdin, terminal: false }).on('line', (line) => {
  try { queue.push(JSON.parse(line)); } catch (e) { return; }
  pump();
}).on('close', () => process.exit(0));

send({ id: 0, ev: 'ready', language: 'javascript', version: process.versions.node, pid: process.pid });
