// Drives srt-mcp's LibreChat Code API with the unmodified LibreChat
// clients from npm: @librechat/agents 3.9.2 (current: Bearer JWT, file refs
// with storage_session_id) or 3.1.63 (legacy: X-API-Key, file refs with
// session_id), invoked as LibreChat's ToolNode does, plus axios/form-data
// versions of LibreChat's own upload, freshness and download helpers (they
// live in unpublished LibreChat modules). One JSON line per check; exit 0
// only if every check passed.
//
//   LIBRECHAT_CODE_BASEURL=http://127.0.0.1:PORT/v1/librechat node librechat.cjs modern  (CODE_JWT=<token>)
//   LIBRECHAT_CODE_BASEURL=... LIBRECHAT_CODE_API_KEY=<key> node librechat.cjs legacy
'use strict';
const gen = process.argv[2];
const base = process.env.LIBRECHAT_CODE_BASEURL; // read at require time by the legacy package
const { createCodeExecutionTool } = require(gen === 'legacy' ? 'lc-legacy' : 'lc-modern');
const axios = require('axios');
const FormData = require('form-data');

let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}

const userId = '65f0c0ffee0000000000user';
const apiKey = process.env.LIBRECHAT_CODE_API_KEY;
const jwt = process.env.CODE_JWT;
const authHeaders = gen === 'legacy' ? { 'X-API-Key': apiKey } : jwt ? { Authorization: `Bearer ${jwt}` } : {};

function makeTool() {
  if (gen === 'legacy') {
    return createCodeExecutionTool({ user_id: userId, LIBRECHAT_CODE_API_KEY: apiKey });
  }
  return createCodeExecutionTool({ user_id: userId, baseUrl: base, authHeaders: async () => authHeaders,
    codeSessionKey: 'execute_code', executionProfile: 'default', statefulSessions: false });
}

// As LangGraph's ToolNode calls a tool: a tool call, with LibreChat's
// session context injected.
async function run(tool, args, extra = {}) {
  const msg = await tool.invoke({ id: 'call_' + Math.random().toString(36).slice(2), name: 'execute_code', args, type: 'tool_call', ...extra });
  return { content: String(msg.content), artifact: msg.artifact || {} };
}

async function upload(name, content) {
  const form = new FormData();
  if (gen === 'legacy') {
    form.append('entity_id', 'agent_abc123');
  } else {
    form.append('kind', 'user');
    form.append('id', userId);
  }
  form.append('file', Buffer.from(content), name);
  const r = await axios.post(`${base}/upload`, form, {
    headers: { ...form.getHeaders(), 'User-Agent': 'LibreChat/1.0', 'User-Id': userId, ...authHeaders },
    maxContentLength: 150 << 20, maxBodyLength: 150 << 20, timeout: 120000,
  });
  return r.data;
}

async function main() {
  const tool = makeTool();
  // 1. print(1+1)
  let r = await run(tool, { lang: 'py', code: 'print(1+1)' });
  check('exec print(1+1)', r.content.includes('stdout:\n2'), r.content);

  // 2. Upload a file, as LibreChat does when a user attaches one.
  const up = await upload('input.txt', 'hello from the user\n');
  const sid = gen === 'legacy' ? up.session_id : up.storage_session_id;
  const fid = up.files && up.files[0] && up.files[0].fileId;
  check('upload', up.message === 'success' && sid && fid && /^[A-Za-z0-9_-]+$/.test(fid), up);

  // 3. The freshness probe LibreChat runs before each exec.
  if (gen === 'legacy') {
    const s = await axios.get(`${base}/files/${sid}`, { params: { detail: 'summary', entity_id: 'agent_abc123' }, headers: { 'User-Agent': 'LibreChat/1.0', ...authHeaders }, timeout: 5000 });
    const lm = s.data.find((f) => f.name.startsWith(`${sid}/${fid}`))?.lastModified;
    check('freshness (files?detail=summary)', lm && Date.now() - Date.parse(lm) < 3600e3, s.data);
  } else {
    const s = await axios.get(`${base}/sessions/${sid}/objects/${fid}`, { params: { kind: 'user', id: userId }, headers: { 'User-Agent': 'LibreChat/1.0', ...authHeaders }, timeout: 5000 });
    check('freshness (sessions/objects)', s.data.lastModified && s.data.originalFilename === 'input.txt', s.data);
  }

  // 4. Read the file in code and produce an output file.
  const injected = gen === 'legacy'
    ? [{ id: fid, session_id: sid, name: 'input.txt' }]
    : [{ id: fid, resource_id: userId, storage_session_id: sid, name: 'input.txt', kind: 'user' }];
  r = await run(tool, { lang: 'py', code: "d = open('/mnt/data/input.txt').read()\nopen('/mnt/data/result.txt', 'w').write(d.upper())\nprint(len(d))" },
    { session_id: sid, _injected_files: injected });
  const out = (r.artifact.files || []).find((f) => f.name === 'result.txt');
  check('exec reads the upload and writes a file', r.content.includes('stdout:\n20') && out && r.artifact.session_id, { content: r.content, artifact: r.artifact });
  if (!out) return;

  // 5. LibreChat downloads every listed file at once.
  const dsid = out.storage_session_id || r.artifact.session_id;
  const q = gen === 'legacy' ? '' : `?kind=user&id=${userId}`;
  const dl = await axios.get(`${base}/download/${dsid}/${out.id}${q}`, { responseType: 'arraybuffer', headers: { 'User-Agent': 'LibreChat/1.0', ...authHeaders }, timeout: 15000 });
  check('download the output file', Buffer.from(dl.data).toString() === 'HELLO FROM THE USER\n', { status: dl.status, type: dl.headers['content-type'], body: Buffer.from(dl.data).toString() });

  // 6. The next call in the same run sees the output file (ToolNode injection).
  const next = gen === 'legacy'
    ? [{ session_id: dsid, id: out.id, name: 'result.txt' }]
    : [{ id: out.id, name: 'result.txt', storage_session_id: dsid, kind: 'user', resource_id: userId }];
  r = await run(tool, { lang: 'bash', code: 'cat /mnt/data/result.txt' }, { session_id: dsid, _injected_files: next });
  check('the next call sees the output file', r.content.includes('HELLO FROM THE USER'), r.content);

  if (gen === 'legacy') {
    // 7. Legacy fallback: a session without injected files lists them.
    const full = await axios.get(`${base}/files/${dsid}`, { params: { detail: 'full' }, headers: authHeaders });
    const f = full.data.find((x) => x.name.startsWith(`${dsid}/${out.id}`));
    check('files?detail=full names and metadata', f && f.metadata && f.metadata['original-filename'] === 'result.txt', full.data);
    r = await run(tool, { lang: 'bash', code: 'ls /mnt/data' }, { session_id: dsid });
    check('legacy fallback through /files', r.content.includes('result.txt'), r.content);
  }

  // 8. A runtime error in the user's code is a normal result with stderr.
  r = await run(tool, { lang: 'py', code: '1/0' });
  check('a failing program shows its traceback', r.content.includes('ZeroDivisionError'), r.content);
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (err) => {
    check('no exception', false, String((err && err.stack) || err) + (err && err.response ? ' ' + JSON.stringify(err.response.data) : ''));
    process.exit(1);
  },
);
