// srt-mcp's JavaScript kernel: one long-lived Node.js context per
// workspace, driven over pipes (see kernel.go for the protocol). Frames go
// out on stdout prefixed with \x1e; anything else on stdout (a child
// process writing directly) is the current cell's output. A cell's output
// cap is applied here: past it, output is counted and dropped, never sent.
'use strict';
const vm = require('vm');
const util = require('util');
const fs = require('fs');
const readline = require('readline');

const RS = '\x1e';
const PIECE = 65536; // bytes of output per frame, at most
const REPR_MAX = 1 << 20; // a REPL value and its newline are cut to this (or what the cap leaves)
const EVALUE_MAX = 4096; // an error frame's message (the stack goes to stderr)

// Node makes a piped stdout non-blocking: a large writeSync would stop
// part way. Make it blocking, and finish partial writes all the same.
try { process.stdout._handle.setBlocking(true); } catch (e) { /* not a pipe */ }
const pause = new Int32Array(new SharedArrayBuffer(4));
function writeAll(buf) {
  for (let off = 0; off < buf.length;) {
    try {
      off += fs.writeSync(1, buf, off, buf.length - off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}
function send(m) {
  writeAll(Buffer.from(RS + JSON.stringify(m) + '\n'));
}

let cell = 0;
let execCount = 0;
let cap = 0; // the request's output cap per stream (0: none)
let sent = { stdout: 0, stderr: 0 };
let noted = {}; // streams whose "truncated" frame was sent
const loaded = new Set();

function truncated(ev) {
  if (!noted[ev]) {
    noted[ev] = true;
    send({ id: cell, ev: 'truncated', stream: ev });
  }
}

// utf8Cut returns the longest start of buf of at most n bytes that ends on
// a character boundary.
function utf8Cut(buf, n) {
  if (buf.length <= n) return buf;
  while (n > 0 && (buf[n] & 0xc0) === 0x80) n--;
  return buf.subarray(0, Math.max(n, 0));
}

// output sends chunk (a string or bytes) as the current request's output
// on stream ev, in pieces, up to the cap; the rest is dropped.
function output(ev, chunk, encoding) {
  const left = cap > 0 ? cap - sent[ev] : Infinity;
  if (left <= 0) return truncated(ev);
  const enc = Buffer.isEncoding(encoding) ? encoding.toLowerCase() : 'utf8';
  const utf8 = enc === 'utf8' || enc === 'utf-8';
  if (typeof chunk === 'string' && utf8 && chunk.length * 3 <= Math.min(left, PIECE)) {
    sent[ev] += Buffer.byteLength(chunk); // small: as it is
    if (chunk) send({ id: cell, ev, data: chunk });
    return;
  }
  let buf;
  let full = false;
  if (typeof chunk === 'string') {
    if (utf8) {
      // A string has at least as many UTF-8 bytes as UTF-16 units: no
      // more than left of them are needed.
      full = chunk.length > left;
      buf = Buffer.from(full ? chunk.slice(0, left) : chunk);
    } else {
      buf = Buffer.from(chunk, enc);
    }
  } else if (ArrayBuffer.isView(chunk)) {
    buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  } else {
    buf = Buffer.from(String(chunk));
  }
  if (buf.length > left) full = true;
  if (full) buf = utf8Cut(buf, left);
  sent[ev] += buf.length;
  for (let off = 0; off < buf.length;) {
    let end = utf8Cut(buf.subarray(off), PIECE).length + off;
    if (end === off) end = Math.min(off + PIECE, buf.length); // not UTF-8: cut anywhere
    send({ id: cell, ev, data: buf.toString('utf8', off, end) });
    off = end;
  }
  if (full) {
    sent[ev] = Math.max(sent[ev], cap);
    truncated(ev);
  }
}

const out = (ev) => (chunk, enc, cb) => {
  output(ev, chunk, typeof enc === 'string' ? enc : undefined);
  if (typeof enc === 'function') enc();
  else if (typeof cb === 'function') cb();
  return true;
};
process.stdout.write = out('stdout');
process.stderr.write = out('stderr');

// shown cuts a value's text (with a note saying so) so that it and the
// newline the server adds fit in REPR_MAX bytes and what the cap leaves.
function shown(text) {
  let limit = REPR_MAX - 1;
  if (cap > 0) limit = Math.min(limit, cap - sent.stdout - 1);
  if (text.length * 3 <= limit) return text;
  const buf = Buffer.from(text);
  if (buf.length <= limit) return text;
  const note = `\u2026 (truncated, ${buf.length} bytes in all)`;
  const keep = limit - Buffer.byteLength(note);
  truncated('stdout');
  if (keep < 0) return null; // not even the note fits in what the cap leaves
  return utf8Cut(buf, keep).toString() + note;
}

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
      const repr = shown(util.inspect(value, { depth: 4, breakLength: 100 }));
      if (repr !== null) {
        sent.stdout += Buffer.byteLength(repr) + 1;
        send({ id, ev: 'result', repr });
      }
    }
  } catch (e) {
    ok = false;
    const text = (e && e.stack) ? String(e.stack) : String(e);
    output('stderr', text.replace(/\n\s+at [^\n]*node:vm[^\n]*[\s\S]*$/, '') + '\n');
    send({ id, ev: 'error', ename: (e && e.name) || 'Error', evalue: String((e && e.message) || e).slice(0, EVALUE_MAX) });
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
  output('stderr', 'Uncaught ' + ((e && e.stack) || String(e)) + '\n');
});
process.on('unhandledRejection', (e) => {
  output('stderr', 'Unhandled rejection: ' + ((e && e.stack) || String(e)) + '\n');
});

const queue = [];
let busy = false;
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const req = queue.shift();
    cell = req.id || 0;
    cap = req.op === 'exec' ? Math.max(Number(req.max_output) || 0, 0) : 0;
    sent = { stdout: 0, stderr: 0 };
    noted = {};
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
