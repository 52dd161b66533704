// srt-mcp's playground: pick a language, write code, run it in the
// sandbox with the output streaming in, and see the conversation's files.
// Plain browser JavaScript; the editor is CodeMirror when its files are
// there, a text area otherwise.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const status = (t) => { $('status').textContent = t; };
  const modes = { python: 'python', javascript: 'javascript', typescript: 'text/typescript', bash: 'shell', c: 'text/x-csrc',
    cpp: 'text/x-c++src', java: 'text/x-java', go: 'go', rust: 'rust', php: 'application/x-httpd-php-open', r: 'r', fortran: 'fortran', d: 'd' };
  let editor = null;
  if (window.CodeMirror) {
    editor = CodeMirror.fromTextArea($('code'), { lineNumbers: true, mode: 'python', indentUnit: 4, viewportMargin: Infinity });
  }
  const code = () => (editor ? editor.getValue() : $('code').value);
  $('apikey').value = sessionStorage.getItem('srt-mcp-key') || '';
  const key = () => $('apikey').value.trim();
  const headers = () => (key() ? { Authorization: 'Bearer ' + key() } : {});

  // A refused key (401) says what to do rather than how it failed.
  const keyMessage = () => (key() ? "the API key was refused: enter the server's API key" : "enter the server's API key");

  async function api(path, opts) {
    const r = await fetch(path, Object.assign({}, opts, { headers: Object.assign({}, (opts && opts.headers) || {}, headers()) }));
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { const j = await r.json(); msg = j.error || msg; } catch (e) { /* not JSON */ }
      if (r.status === 401) msg = keyMessage();
      const err = new Error(msg);
      err.status = r.status;
      throw err;
    }
    return r;
  }

  const setMode = () => { if (editor) editor.setOption('mode', modes[$('language').value] || null); };

  // The language list. It is fetched at load and again whenever the key
  // changes (a server with a token refuses it without one); only the
  // newest request's answer is used. listProblem says why the list is
  // empty, for Run to repeat; wanted is the language last chosen, kept
  // across lists.
  let listing = 0, listedKey = null, keyTimer = null, listProblem = 'the language list is loading', wanted = '';
  function fillLanguages(runtimes, placeholder) {
    const sel = $('language');
    const previous = sel.value;
    sel.textContent = '';
    for (const rt of runtimes) {
      const o = document.createElement('option');
      o.value = rt.language;
      o.textContent = rt.language + (rt.version ? ' (' + rt.version + ')' : '');
      sel.appendChild(o);
    }
    if (!runtimes.length) {
      const o = document.createElement('option');
      o.value = ''; o.textContent = placeholder; o.disabled = true; o.selected = true;
      sel.appendChild(o);
      return;
    }
    const has = (l) => runtimes.some((rt) => rt.language === l);
    sel.value = has(wanted) ? wanted : has(previous) ? previous : has('python') ? 'python' : runtimes[0].language;
    setMode();
  }
  async function loadRuntimes() {
    clearTimeout(keyTimer);
    const gen = ++listing;
    listedKey = key();
    status('listing languages…');
    try {
      const r = await (await api('playground/api/runtimes')).json();
      if (gen !== listing) return;
      const runtimes = r.runtimes || [];
      listProblem = runtimes.length ? '' : 'the server offers no languages';
      fillLanguages(runtimes, '(no languages)');
      status(runtimes.length ? 'ready' : listProblem);
    } catch (e) {
      if (gen !== listing) return;
      if (e.status === 401) {
        listProblem = e.message + ' to list the languages';
        fillLanguages([], "(enter the server's API key)");
      } else {
        listProblem = 'could not list runtimes: ' + e.message;
        if (!$('language').value) fillLanguages([], '(could not list languages)');
      }
      status(listProblem);
    }
  }
  // Typing the key lists the languages again after a short pause; leaving
  // the field (change) does it at once. A key that has listed them is not
  // asked again.
  function keyChanged(now) {
    sessionStorage.setItem('srt-mcp-key', $('apikey').value);
    clearTimeout(keyTimer);
    if (key() === listedKey && !listProblem) return;
    keyTimer = setTimeout(loadRuntimes, now ? 0 : 300);
  }
  $('apikey').addEventListener('input', () => keyChanged(false));
  $('apikey').addEventListener('change', () => keyChanged(true));
  $('language').addEventListener('change', () => { wanted = $('language').value; setMode(); });

  function show(files) {
    const list = $('files'), imgs = $('images');
    list.textContent = ''; imgs.textContent = '';
    for (const f of files) {
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = f.url; a.textContent = f.name + ' (' + f.size_bytes + ' bytes)'; a.download = f.name;
      li.appendChild(a); list.appendChild(li);
      if (/^image\/(png|jpeg|gif|webp)$/.test(f.mime_type)) {
        const img = document.createElement('img');
        img.src = f.url; img.alt = f.name;
        imgs.appendChild(img);
      }
    }
  }

  function append(text, cls) {
    const span = document.createElement('span');
    if (cls) span.className = cls;
    span.textContent = text;
    $('output').appendChild(span);
    $('output').scrollTop = $('output').scrollHeight;
  }

  async function run() {
    const language = $('language').value;
    if (!language) {
      // Never ask the server to run in no language.
      status('no language chosen: ' + (listProblem || 'choose one in the list'));
      (listProblem && /API key/.test(listProblem) ? $('apikey') : $('language')).focus();
      return;
    }
    $('run').disabled = true; $('output').textContent = ''; $('timing').textContent = '';
    status('running…');
    const started = performance.now();
    try {
      const r = await api('playground/api/run', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ language, code: code(), conversation: $('session').value }) });
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i); buf = buf.slice(i + 2);
          let ev = 'message', data = '';
          for (const line of frame.split('\n')) {
            if (line.startsWith('event: ')) ev = line.slice(7);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          const d = JSON.parse(data || '{}');
          if (ev === 'stdout') append(d.data);
          else if (ev === 'stderr') append(d.data, 'stderr');
          else if (ev === 'done') {
            append('\n[exit ' + d.exit_code + (d.message ? ': ' + d.message : '') + ']\n', 'meta');
            show(d.files || []);
            status(d.exit_code === 0 ? 'done' : 'failed');
          }
        }
      }
    } catch (e) {
      append('error: ' + e.message + '\n', 'stderr'); status('error');
    } finally {
      $('run').disabled = false;
      $('timing').textContent = Math.round(performance.now() - started) + ' ms';
    }
  }
  $('run').addEventListener('click', run);

  $('upload').addEventListener('change', async () => {
    for (const f of $('upload').files) {
      const form = new FormData();
      form.append('file', f, f.name);
      try {
        await api('playground/api/upload?conversation=' + encodeURIComponent($('session').value), { method: 'POST', body: form });
        status('uploaded ' + f.name);
      } catch (e) { status('upload failed: ' + e.message); }
    }
    try { show((await (await api('playground/api/files?conversation=' + encodeURIComponent($('session').value))).json()).files); } catch (e) { /* shown on next run */ }
  });
  loadRuntimes();
})();
