// hybridgw operator page. Plain browser JavaScript, no libraries: every
// figure comes from the gateway's own API, each call with the bearer token
// the operator typed (kept in sessionStorage, so it ends with the tab).
// Text from devices is only ever set as textContent, never parsed as HTML.
'use strict';

(() => {
  const TOKEN_KEY = 'hybridgw.token';
  const MCP_VERSION = '2025-11-25';
  const DEVICES_EVERY_MS = 3000;
  const METRICS_EVERY_MS = 2000;
  const BINDINGS_EVERY_MS = 3000;
  const BINDING_PAGES = 20; // pages of /api/bindings read per refresh
  // The firmware's emotion names (its display maps each to a face).
  const EMOTIONS = ['neutral', 'happy', 'laughing', 'funny', 'sad', 'angry',
    'crying', 'loving', 'embarrassed', 'surprised', 'shocked', 'thinking',
    'winking', 'cool', 'relaxed', 'delicious', 'kissy', 'confident',
    'sleepy', 'silly', 'confused'];
  // The main counters: sums over every label of one metric.
  const COUNTERS = [
    { label: 'Devices online', metric: 'hybridgw_devices_online' },
    { label: 'Live sessions', metric: 'hybridgw_sessions' },
    { label: 'Sessions started', metric: 'hybridgw_sessions_started_total', rate: true },
    { label: 'Sessions ended', metric: 'hybridgw_sessions_ended_total', rate: true },
    { label: 'MCP requests', metric: 'hybridgw_mcp_requests_total', rate: true },
    { label: 'Messages relayed', metric: 'hybridgw_messages_relayed_total', rate: true },
    { label: 'UDP received', metric: 'hybridgw_udp_received_total', rate: true },
    { label: 'UDP sent', metric: 'hybridgw_udp_sent_total', rate: true },
    { label: 'UDP dropped', metric: 'hybridgw_udp_drops_total', rate: true },
    { label: 'HTTP responses', metric: 'hybridgw_http_responses_total', rate: true },
    { label: 'Broker', metric: 'hybridgw_broker_up', format: (v) => (v > 0 ? 'up' : 'down') },
    { label: 'Heap in use', metric: 'hybridgw_heap_in_use_bytes', format: bytes },
  ];

  const $ = (id) => document.getElementById(id);
  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    devices: [],
    selected: null, // client id of the device panel
    mcp: null, // { device, sid, version, nextId }
    tools: [],
    lastMetrics: null, // { at, sums }
    timers: {}, // name -> the pending setTimeout
    running: false,
    generation: 0, // a sign-out ends the polls of the sign-in before
    bindings: [],
    pending: [],
    bindingsOff: false, // the gateway answered 404: no bindings API
  };

  class AuthError extends Error {}

  // ---- HTTP ----------------------------------------------------------

  // The API relative to the page (/ui/), so a reverse proxy's prefix holds.
  function url(path) {
    return new URL('../' + path, window.location.href).toString();
  }

  // A path segment; '@' (in every xiaozhi client id) may stay as it is.
  function segment(s) {
    return encodeURIComponent(s).replace(/%40/g, '@');
  }

  async function call(path, opts = {}) {
    const headers = Object.assign({ Authorization: 'Bearer ' + state.token },
      opts.headers || {});
    const res = await fetch(url(path), Object.assign({}, opts, {
      headers, cache: 'no-store', credentials: 'omit', redirect: 'error',
    }));
    if (res.status === 401) {
      throw new AuthError('the gateway refused the token');
    }
    return res;
  }

  async function json(res) {
    const text = await res.text();
    try {
      return text === '' ? null : JSON.parse(text);
    } catch (e) {
      return { error: 'not JSON: ' + text.slice(0, 200) };
    }
  }

  function el(tag, props = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c);
    }
    return e;
  }

  function bytes(v) {
    const units = ['B', 'KiB', 'MiB', 'GiB'];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? v : v.toFixed(1)) + ' ' + units[i];
  }

  function duration(s) {
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    if (d > 0) return `${d}d ${h}h`;
    if (h > 0) return `${h}h ${m}m`;
    return `${m}m ${s % 60}s`;
  }

  function number(v) {
    return Number.isInteger(v) ? v.toLocaleString('en') : v.toFixed(2);
  }

  // ---- sign in -------------------------------------------------------

  function showLogin(why) {
    stop();
    $('app').hidden = true;
    $('signout').hidden = true;
    $('health').hidden = true;
    $('uptime').textContent = '';
    $('updated').textContent = '';
    $('login').hidden = false;
    $('login-error').textContent = why || '';
    $('token').value = '';
    $('token').focus();
  }

  function authFailed(err) {
    if (err instanceof AuthError) {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = '';
      showLogin('The gateway refused this token (401): enter http.token again.');
      return true;
    }
    return false;
  }

  $('token-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    state.token = $('token').value.trim();
    $('login-error').textContent = '';
    try {
      const res = await call('api/devices');
      if (!res.ok) {
        $('login-error').textContent = `The gateway answered ${res.status}.`;
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, state.token);
      start();
    } catch (err) {
      if (err instanceof AuthError) {
        $('login-error').textContent = 'Wrong token: the gateway answered 401.';
      } else {
        $('login-error').textContent = 'The gateway cannot be reached: ' + err.message;
      }
    }
  });

  $('signout').addEventListener('click', () => {
    closePanel(); // its MCP session ends while the token is still known
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = '';
    showLogin('');
  });

  // ---- polling -------------------------------------------------------

  // fn now, then ms after each run ends: a slow gateway is never asked
  // twice at once.
  function every(name, ms, fn) {
    const generation = state.generation;
    const live = () => state.running && state.generation === generation;
    const run = async () => {
      if (!live()) return;
      try {
        await fn();
      } catch (err) {
        if (authFailed(err)) return;
      }
      if (live()) state.timers[name] = setTimeout(run, ms);
    };
    run();
  }

  function start() {
    $('login').hidden = true;
    $('app').hidden = false;
    $('signout').hidden = false;
    $('health').hidden = false;
    state.running = true;
    state.generation++;
    every('devices', DEVICES_EVERY_MS, refreshDevices);
    every('metrics', METRICS_EVERY_MS, refreshMetrics);
    every('bindings', BINDINGS_EVERY_MS, refreshBindings);
    every('series', SERIES_EVERY_MS, refreshSeries);
  }

  function stop() {
    state.running = false;
    state.generation++;
    Object.values(state.timers).forEach(clearTimeout);
    state.timers = {};
  }

  function stamp() {
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString('en-GB');
  }

  // ---- devices and sessions -----------------------------------------

  function deviceId(d) {
    return d.client_id || d.clientId || '';
  }

  function sessionText(s) {
    if (!s) return 'none';
    return s.backend ? `${s.state} · ${s.backend}` : s.state;
  }

  async function refreshDevices() {
    let doc;
    try {
      const res = await call('api/devices');
      doc = await json(res);
      if (!res.ok) throw new Error((doc && doc.error) || 'HTTP ' + res.status);
      $('devices-error').textContent = '';
    } catch (err) {
      if (err instanceof AuthError) throw err;
      $('devices-error').textContent = 'Devices: ' + err.message;
      return;
    }
    state.devices = Array.isArray(doc.devices) ? doc.devices : [];
    renderDevices();
    renderSessions();
    if (state.selected !== null) await refreshDetail();
    stamp();
  }

  function matches(d, filter) {
    if (filter === '') return true;
    const hay = [deviceId(d), d.label, sessionText(d.session),
      d.mcp && d.mcp.state].join(' ').toLowerCase();
    return hay.includes(filter);
  }

  // A row that opens its device by click, or by Enter once focused.
  function openable(tr, id) {
    tr.tabIndex = 0;
    tr.addEventListener('click', () => selectDevice(id));
    tr.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') selectDevice(id);
    });
  }

  function renderDevices() {
    const filter = $('device-filter').value.trim().toLowerCase();
    const body = $('devices').tBodies[0];
    const rows = state.devices.filter((d) => matches(d, filter)).map((d) => {
      const id = deviceId(d);
      const mcp = d.mcp || {};
      const tr = el('tr', { 'data-id': id },
        el('td', {}, el('div', { class: 'mono', text: id }),
          el('div', { class: 'muted small', text: [d.label, d.board,
            d.firmware].filter(Boolean).join(' · ') })),
        el('td', {}, el('span', { class: 'dot ' + (d.online ? 'ok' : 'off'),
          text: d.online ? 'online' : 'offline' })),
        el('td', { text: sessionText(d.session) }),
        el('td', { text: mcp.state || '' }),
        el('td', { class: 'num', text: mcp.tools !== undefined ? String(mcp.tools) : '' }));
      if (id === state.selected) tr.classList.add('selected');
      openable(tr, id);
      return tr;
    });
    // The rows are made anew each poll: keep the keyboard's place.
    const active = document.activeElement;
    const focused = active && active.closest('#devices tbody tr')
      ? active.dataset.id : null;
    body.replaceChildren(...rows);
    if (focused !== null) {
      const again = rows.find((tr) => tr.dataset.id === focused);
      if (again) again.focus();
    }
    $('device-count').textContent = String(state.devices.length);
    $('devices-empty').hidden = state.devices.length > 0;
  }

  // The UDP path doctor's word on a session (GET /api/devices: udp).
  function udpCell(u) {
    if (!u) return el('td', { class: 'udp', text: '—' });
    const dx = u.diagnosis;
    const text = dx ? `no audio · ${dx.cause}`
      : u.state === 'ok' ? `ok · ${u.packets} packets` : 'waiting for audio';
    const td = el('td', { class: 'udp nowrap' }, el('span', {
      class: 'dot ' + (dx ? 'bad' : u.state === 'ok' ? 'ok' : 'off'), text }));
    td.dataset.udpState = u.state;
    if (dx) {
      td.dataset.udpCause = dx.cause;
      td.title = `told ${u.advertised}; ${dx.hint}`;
    }
    return td;
  }

  function renderSessions() {
    const live = state.devices.filter((d) => d.session);
    const rows = live.map((d) => {
      const id = deviceId(d);
      const tr = el('tr', { 'data-id': id },
        el('td', { class: 'mono', text: id }),
        el('td', { class: 'nowrap', text: d.session.state || '' }),
        el('td', { class: 'nowrap', text: d.session.backend || '—' }),
        el('td', { class: 'mono', text: d.session.session_id || '' }),
        udpCell(d.udp));
      openable(tr, id);
      return tr;
    });
    $('sessions').tBodies[0].replaceChildren(...rows);
    $('session-count').textContent = String(live.length);
    $('sessions-empty').hidden = live.length > 0;
  }

  $('device-filter').addEventListener('input', renderDevices);

  // key: value pairs of a device as the API gives it, nested keys dotted.
  function flatten(obj, prefix, out) {
    for (const [k, v] of Object.entries(obj)) {
      const key = prefix ? prefix + '.' + k : k;
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
        flatten(v, key, out);
      } else if (Array.isArray(v)) {
        out.push([key, v.every((x) => typeof x !== 'object') ? v.join(', ')
          : JSON.stringify(v)]);
      } else {
        out.push([key, v === null ? '—' : String(v)]);
      }
    }
    return out;
  }

  async function refreshDetail() {
    const id = state.selected;
    const res = await call('api/devices/' + segment(id));
    if (id !== state.selected) return;
    const doc = await json(res);
    $('dev-gone').hidden = res.status !== 404;
    if (!res.ok) return;
    const items = flatten(doc, '', []).flatMap(([k, v]) =>
      [el('dt', { text: k }), el('dd', { text: v, 'data-key': k })]);
    $('dev-detail').replaceChildren(...items);
    $('dev-raw').textContent = JSON.stringify(doc, null, 2);
  }

  async function selectDevice(id) {
    if (state.selected === id) return;
    state.selected = id;
    $('device-panel').hidden = false;
    $('dev-id').textContent = id;
    $('dev-detail').replaceChildren();
    $('dev-raw').textContent = '';
    $('call-result').replaceChildren();
    $('alert-result').replaceChildren();
    renderDevices();
    closeMcp();
    try {
      await Promise.all([refreshDetail(), loadTools()]);
    } catch (err) {
      authFailed(err);
    }
  }

  function closePanel() {
    state.selected = null;
    closeMcp();
    $('device-panel').hidden = true;
    renderDevices();
  }

  $('dev-close').addEventListener('click', closePanel);

  // ---- MCP (Streamable HTTP, /mcp/devices/{clientId}) ---------------

  class RpcError extends Error {
    constructor(error) {
      super(`${error.message} (${error.code})`);
      this.rpc = error;
    }
  }

  // The JSON-RPC message of an answer, as JSON or as an event stream.
  async function rpcAnswer(res, id) {
    const type = res.headers.get('Content-Type') || '';
    const text = await res.text();
    if (!type.startsWith('text/event-stream')) return JSON.parse(text);
    for (const block of text.split(/\r?\n\r?\n/)) {
      const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (data === '') continue;
      const msg = JSON.parse(data);
      if (msg.id === id) return msg;
    }
    throw new Error('the event stream ended without an answer');
  }

  async function mcpPost(device, msg, session) {
    const headers = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    };
    if (session) {
      headers['Mcp-Session-Id'] = session.sid;
      headers['MCP-Protocol-Version'] = session.version;
    }
    return call('mcp/devices/' + segment(device), {
      method: 'POST', headers, body: JSON.stringify(msg),
    });
  }

  async function httpError(res) {
    const doc = await json(res);
    const why = doc && (doc.error && (doc.error.message || doc.error));
    return new Error(`HTTP ${res.status}` + (why ? ': ' + why : ''));
  }

  async function mcpOpen(device) {
    const res = await mcpPost(device, {
      jsonrpc: '2.0', id: 0, method: 'initialize',
      params: {
        protocolVersion: MCP_VERSION, capabilities: {},
        clientInfo: { name: 'hybridgw-ui', version: '1.0.0' },
      },
    });
    if (!res.ok) throw await httpError(res);
    const msg = await rpcAnswer(res, 0);
    if (msg.error) throw new RpcError(msg.error);
    const session = {
      device, sid: res.headers.get('Mcp-Session-Id') || '',
      version: msg.result.protocolVersion || MCP_VERSION, nextId: 1,
    };
    const note = await mcpPost(device,
      { jsonrpc: '2.0', method: 'notifications/initialized' }, session);
    await note.text();
    return session;
  }

  function closeMcp() {
    const s = state.mcp;
    state.mcp = null;
    if (s && s.sid && state.token) {
      // keepalive: the DELETE still goes out when the page is being left.
      call('mcp/devices/' + segment(s.device), {
        method: 'DELETE', keepalive: true,
        headers: { 'Mcp-Session-Id': s.sid, 'MCP-Protocol-Version': s.version },
      }).catch(() => {});
    }
  }

  // One request on the device's session; an ended session (404) is opened
  // again once.
  async function mcpRequest(device, method, params) {
    for (let attempt = 0; attempt < 2; attempt++) {
      if (!state.mcp || state.mcp.device !== device) {
        closeMcp();
        state.mcp = await mcpOpen(device);
      }
      const s = state.mcp;
      const id = s.nextId++;
      const res = await mcpPost(device, { jsonrpc: '2.0', id, method, params }, s);
      if (res.status === 404 && attempt === 0) {
        state.mcp = null;
        continue;
      }
      if (!res.ok) throw await httpError(res);
      const msg = await rpcAnswer(res, id);
      if (msg.error) throw new RpcError(msg.error);
      return msg.result;
    }
    throw new Error('the MCP session could not be opened');
  }

  async function loadTools() {
    const device = state.selected;
    const tools = [];
    $('tools-status').textContent = 'reading tools/list…';
    $('tools').replaceChildren();
    $('call-tool').replaceChildren();
    $('call-fields').replaceChildren();
    try {
      let cursor;
      for (let page = 0; page < 100; page++) {
        const result = await mcpRequest(device, 'tools/list',
          cursor ? { cursor } : {});
        tools.push(...(result.tools || []));
        cursor = result.nextCursor;
        if (!cursor) break;
      }
    } catch (err) {
      if (err instanceof AuthError) throw err;
      if (device === state.selected) {
        $('tools-status').textContent = 'tools/list failed: ' + err.message;
      }
      return;
    }
    if (device !== state.selected) return;
    state.tools = tools;
    renderTools();
  }

  $('tools-reload').addEventListener('click', () => {
    closeMcp();
    loadTools().catch(authFailed);
  });

  function renderTools() {
    const tools = state.tools;
    $('tool-count').textContent = String(tools.length);
    $('tools-status').textContent = tools.length ? '' : 'The device offers no tools here.';
    $('tools').replaceChildren(...tools.map((t) => {
      const li = el('li', { 'data-tool': t.name },
        el('div', { class: 'name', text: t.name }),
        el('div', { class: 'desc', text: (t.description || '').split('\n')[0] }));
      li.addEventListener('click', () => {
        $('call-tool').value = t.name;
        renderFields();
      });
      return li;
    }));
    $('call-tool').replaceChildren(...tools.map((t) =>
      el('option', { value: t.name, text: t.name })));
    renderFields();
  }

  // ---- the call form -------------------------------------------------

  function toolNamed(name) {
    return state.tools.find((t) => t.name === name);
  }

  // One input per property of the tool's inputSchema; what is not a
  // scalar is typed as JSON.
  function renderFields() {
    const tool = toolNamed($('call-tool').value);
    const fields = [];
    $('call-desc').textContent = tool ? tool.description || '' : '';
    const schema = (tool && tool.inputSchema) || {};
    const required = new Set(schema.required || []);
    Object.entries(schema.properties || {}).forEach(([name, prop], i) => {
      const id = 'arg-' + i;
      const type = Array.isArray(prop.type) ? prop.type[0] : prop.type;
      let input;
      if (Array.isArray(prop.enum)) {
        input = el('select', {}, ...prop.enum.map((v) =>
          el('option', { value: JSON.stringify(v), text: String(v) })));
        input.dataset.kind = 'json';
      } else if (type === 'boolean') {
        input = el('input', { type: 'checkbox' });
        input.dataset.kind = 'boolean';
      } else if (type === 'integer' || type === 'number') {
        input = el('input', { type: 'number' });
        input.step = type === 'integer' ? '1' : 'any';
        if (prop.minimum !== undefined) input.min = prop.minimum;
        if (prop.maximum !== undefined) input.max = prop.maximum;
        input.dataset.kind = 'number';
      } else if (type === 'string') {
        input = el('input', { type: 'text' });
        input.dataset.kind = 'string';
      } else {
        input = el('textarea', { placeholder: 'JSON' });
        input.dataset.kind = 'json';
      }
      input.id = id;
      input.dataset.arg = name;
      input.required = required.has(name) && type !== 'boolean';
      if (prop.default !== undefined && input.dataset.kind !== 'boolean') {
        input.value = typeof prop.default === 'string' ? prop.default
          : JSON.stringify(prop.default);
      }
      const hint = [type, required.has(name) ? 'required' : '',
        prop.minimum !== undefined ? `≥ ${prop.minimum}` : '',
        prop.maximum !== undefined ? `≤ ${prop.maximum}` : ''].filter(Boolean).join(', ');
      fields.push(el('label', { htmlFor: id, text: `${name}${hint ? ' (' + hint + ')' : ''}` }),
        input);
      if (prop.description) fields.push(el('p', { class: 'muted small', text: prop.description }));
    });
    if (fields.length === 0 && tool) {
      fields.push(el('p', { class: 'muted small', text: 'No arguments.' }));
    }
    $('call-fields').replaceChildren(...fields);
  }

  $('call-tool').addEventListener('change', renderFields);

  function argumentsOf() {
    const args = {};
    for (const input of $('call-fields').querySelectorAll('[data-arg]')) {
      const name = input.dataset.arg;
      const kind = input.dataset.kind;
      if (kind === 'boolean') {
        args[name] = input.checked;
        continue;
      }
      if (input.value === '') continue;
      if (kind === 'number') {
        args[name] = Number(input.value);
      } else if (kind === 'json') {
        try {
          args[name] = JSON.parse(input.value);
        } catch (e) {
          throw new Error(`${name}: not JSON (${e.message})`);
        }
      } else {
        args[name] = input.value;
      }
    }
    return args;
  }

  function showResult(box, ok, status, ...content) {
    box.className = 'result ' + (ok ? 'ok' : 'bad');
    box.replaceChildren(el('div', { class: 'status', text: status }), ...content);
  }

  // A tools/call result: text as text, images as images, the rest as JSON.
  function contentNodes(result) {
    const items = Array.isArray(result.content) ? result.content : [];
    const nodes = items.map((c) => {
      if (c.type === 'text') return el('pre', { class: 'text', text: c.text });
      if (c.type === 'image' && /^image\/(png|jpeg|gif|webp)$/.test(c.mimeType || '')) {
        return el('img', { src: `data:${c.mimeType};base64,${c.data}`, alt: 'image from the device' });
      }
      return el('pre', { text: JSON.stringify(c, null, 2) });
    });
    if (result.structuredContent !== undefined) {
      nodes.push(el('pre', { text: JSON.stringify(result.structuredContent, null, 2) }));
    }
    return nodes;
  }

  $('call-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const device = state.selected;
    const name = $('call-tool').value;
    const box = $('call-result');
    const button = $('call-submit');
    let args;
    try {
      args = argumentsOf();
    } catch (err) {
      showResult(box, false, err.message);
      return;
    }
    button.disabled = true;
    showResult(box, true, `calling ${name}…`);
    const began = performance.now();
    try {
      const result = await mcpRequest(device, 'tools/call', { name, arguments: args });
      const ms = Math.round(performance.now() - began);
      showResult(box, !result.isError,
        `${name}: ${result.isError ? 'the device refused' : 'answered'} in ${ms} ms`,
        ...contentNodes(result));
    } catch (err) {
      if (authFailed(err)) return;
      showResult(box, false, `${name} failed: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  });

  // ---- the alert form ------------------------------------------------

  $('alert-emotion').replaceChildren(...EMOTIONS.map((e) =>
    el('option', { value: e, text: e })));

  $('alert-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const device = state.selected;
    const box = $('alert-result');
    const button = $('alert-submit');
    const body = {
      type: 'alert',
      status: $('alert-status').value,
      message: $('alert-message').value,
      emotion: $('alert-emotion').value,
    };
    button.disabled = true;
    try {
      const res = await call(`api/devices/${segment(device)}/commands`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      const doc = await json(res);
      if (res.ok && doc && doc.success) {
        showResult(box, true, 'alert pushed to the device',
          el('pre', { text: JSON.stringify(doc.data) }));
      } else {
        const why = (doc && doc.error) || 'HTTP ' + res.status;
        showResult(box, false, `refused (${res.status}): ${why}`);
      }
    } catch (err) {
      if (authFailed(err)) return;
      showResult(box, false, 'failed: ' + err.message);
    } finally {
      button.disabled = false;
    }
  });

  // ---- bindings (activation) ------------------------------------------

  function when(ms) {
    return Number.isFinite(ms) ? new Date(ms).toLocaleString('en-GB') : '';
  }

  // Every page of GET /api/bindings (the bindings list is paged by id;
  // the pending activations come whole with the first page).
  async function refreshBindings() {
    if (state.bindingsOff) return;
    const bindings = [];
    let pending = [];
    let after = null;
    try {
      for (let page = 0; page < BINDING_PAGES; page++) {
        const res = await call('api/bindings' + (after === null ? '' : '?after=' + after));
        if (res.status === 404) {
          state.bindingsOff = true;
          $('bindings-off').hidden = false;
          $('bindings-on').hidden = true;
          $('bindings-error').textContent = '';
          return;
        }
        const doc = await json(res);
        if (!res.ok || !doc) throw new Error((doc && doc.error) || 'HTTP ' + res.status);
        if (page === 0 && Array.isArray(doc.pending)) pending = doc.pending;
        if (Array.isArray(doc.bindings)) bindings.push(...doc.bindings);
        if (doc.next === null || doc.next === undefined || doc.next === after) break;
        after = doc.next;
      }
      $('bindings-error').textContent = '';
    } catch (err) {
      if (err instanceof AuthError) throw err;
      $('bindings-error').textContent = 'Bindings: ' + err.message;
      return;
    }
    state.bindings = bindings;
    state.pending = pending;
    renderPending();
    renderBindings();
  }

  function renderPending() {
    const now = Date.now();
    const rows = state.pending.map((p) => {
      const left = (p.expires_ms - now) / 1000;
      return el('tr', { 'data-mac': p.mac || '' },
        el('td', { class: 'mono nowrap', text: p.mac || '' }),
        el('td', { class: 'mono', text: p.uuid || '' }),
        el('td', { text: p.board || '' }),
        el('td', { class: 'mono', text: p.peer || '' }),
        el('td', { class: 'nowrap', text: left > 0 ? 'in ' + duration(left) : 'expired',
          title: when(p.expires_ms) }));
    });
    $('pending').tBodies[0].replaceChildren(...rows);
    $('pending-count').textContent = String(state.pending.length);
    $('pending-empty').hidden = state.pending.length > 0;
  }

  function renderBindings() {
    const filter = $('binding-filter').value.trim().toLowerCase();
    const shown = state.bindings.filter((b) => filter === '' ||
      [b.client_id, b.mac, b.board, b.by].join(' ').toLowerCase().includes(filter));
    const rows = shown.map((b) => {
      const unbind = el('button', { type: 'button', class: 'danger', text: 'Unbind',
        title: 'Revoke its credentials; it must be activated again' });
      unbind.addEventListener('click', () => unbindDevice(b.client_id, unbind));
      return el('tr', { 'data-id': b.client_id || '' },
        el('td', { class: 'mono', text: b.client_id || '' }),
        el('td', { class: 'mono nowrap', text: b.mac || '' }),
        el('td', { class: 'nowrap', text: b.board || '' }),
        el('td', { class: 'nowrap', text: b.by || '' }),
        el('td', { class: 'nowrap', text: when(b.bound_ms) }),
        el('td', { text: b.issued ? 'yes' : 'no' }),
        el('td', { class: 'nowrap' }, unbind));
    });
    $('bindings').tBodies[0].replaceChildren(...rows);
    $('binding-count').textContent = String(state.bindings.length);
    $('bindings-empty').hidden = shown.length > 0;
  }

  // What a refusal of the bindings API means, in the operator's words.
  const BIND_REFUSALS = {
    400: 'not a code',
    404: 'no device is waiting with this code (unknown or expired)',
    409: 'that device is already bound',
    429: 'too many tries: wait a moment, then try again',
  };

  $('bind-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const box = $('bind-result');
    const button = $('bind-submit');
    const code = $('bind-code').value.trim();
    button.disabled = true;
    try {
      const res = await call('api/bindings', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ code }),
      });
      const doc = await json(res);
      if (res.status === 201 && doc && doc.binding) {
        showResult(box, true, `bound ${doc.binding.client_id}`);
        $('bind-code').value = '';
        await refreshBindings();
      } else {
        const why = BIND_REFUSALS[res.status] || (doc && doc.error) || 'refused';
        showResult(box, false, `${res.status}: ${why}`);
      }
    } catch (err) {
      if (authFailed(err)) return;
      showResult(box, false, 'failed: ' + err.message);
    } finally {
      button.disabled = false;
    }
  });

  async function unbindDevice(id, button) {
    const box = $('unbind-result');
    if (!window.confirm(`Unbind ${id}?\n\nIts credentials stop working at once and ` +
      'it has to be activated again.')) {
      return;
    }
    button.disabled = true;
    try {
      const res = await call(`api/bindings/${segment(id)}`, { method: 'DELETE' });
      const doc = await json(res);
      if (res.ok) {
        showResult(box, true, `unbound ${id}`);
      } else {
        const why = res.status === 404 ? 'not bound' : (doc && doc.error) || 'refused';
        showResult(box, false, `${res.status}: ${why}`);
      }
      await refreshBindings();
    } catch (err) {
      if (authFailed(err)) return;
      showResult(box, false, 'failed: ' + err.message);
    } finally {
      button.disabled = false;
    }
  }

  $('binding-filter').addEventListener('input', renderBindings);

  // ---- counters and health ------------------------------------------

  // Prometheus text: the sum of each metric over its labels, and each
  // series as it is written.
  function parseMetrics(text) {
    const sums = new Map();
    const series = [];
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const v = Number(m[3]);
      if (!Number.isFinite(v)) continue;
      sums.set(m[1], (sums.get(m[1]) || 0) + v);
      series.push([m[1] + (m[2] || ''), v]);
    }
    return { sums, series };
  }

  function renderCounters(sums, previous, seconds) {
    const cards = COUNTERS.filter((c) => sums.has(c.metric)).map((c) => {
      const v = sums.get(c.metric);
      let rate = '';
      if (c.rate && previous && previous.has(c.metric) && seconds > 0) {
        rate = `${number(Math.max(0, (v - previous.get(c.metric)) / seconds))}/s`;
      }
      return el('div', { class: 'counter', title: c.metric },
        el('div', { class: 'label', text: c.label }),
        el('div', { class: 'value', 'data-metric': c.metric,
          text: c.format ? c.format(v) : number(v) }),
        el('div', { class: 'rate', text: rate }));
    });
    $('counters').replaceChildren(...cards);
  }

  function renderMetricTable(series) {
    const filter = $('metric-filter').value.trim().toLowerCase();
    if (!$('metrics-details').open) return;
    const rows = series.filter(([k]) => k.toLowerCase().includes(filter))
      .map(([k, v]) => el('tr', {}, el('td', { class: 'mono', text: k }),
        el('td', { class: 'num', text: number(v) })));
    $('metrics').tBodies[0].replaceChildren(...rows);
  }

  function renderHealth(doc, status) {
    const pill = $('health');
    const s = (doc && doc.status) || 'unreachable';
    pill.textContent = s === 'ok' ? 'healthy' : s;
    pill.className = 'pill ' + (s === 'ok' ? 'ok' : s === 'degraded' ? 'warn' : 'bad');
    pill.title = `GET /healthz: ${status}` + (doc && doc.broker ? `, broker ${doc.broker}` : '');
    $('uptime').textContent = doc && doc.uptime_s !== undefined
      ? 'up ' + duration(doc.uptime_s) : '';
    renderBackends(doc || {});
  }

  // The backends of /healthz: each one's state and live sessions, and the
  // routes none of whose backends is in rotation.
  function renderBackends(doc) {
    const list = Array.isArray(doc.backends) ? doc.backends : [];
    const degraded = Array.isArray(doc.degraded) ? doc.degraded : [];
    const nodes = [];
    if (list.length > 0) {
      nodes.push(el('h3', { text: 'Backends' }), el('table', { class: 'data' },
        el('thead', {}, el('tr', {}, el('th', { text: 'backend' }),
          el('th', { text: 'state' }), el('th', { class: 'num', text: 'sessions' }),
          el('th', { text: 'last failure' }))),
        el('tbody', {}, ...list.map((b) => el('tr', { 'data-backend': b.name || '' },
          el('td', { class: 'mono', text: b.name || '' }),
          el('td', {}, el('span', { class: 'dot ' + (b.state === 'up' ? 'ok' : 'off'),
            text: b.state + (b.retry_in_ms !== undefined
              ? ` (retry in ${Math.ceil(b.retry_in_ms / 1000)} s)` : '') })),
          el('td', { class: 'num', text: String(b.active ?? '') }),
          el('td', { class: 'muted small', text: b.last_failure || '' }))))));
    }
    for (const d of degraded) {
      nodes.push(el('p', { class: 'error', text: `Route ${d.route} has no backend ` +
        `in rotation: ${(d.backends || []).map((b) => b.name).join(', ')}` }));
    }
    $('backends').replaceChildren(...nodes);
  }

  let lastSeries = [];
  async function refreshMetrics() {
    const [metrics, health] = await Promise.allSettled([call('metrics'), call('healthz')]);
    for (const r of [metrics, health]) {
      if (r.status === 'rejected' && r.reason instanceof AuthError) throw r.reason;
    }
    if (health.status === 'fulfilled') {
      renderHealth(await json(health.value), health.value.status);
    } else {
      renderHealth(null, 'unreachable');
    }
    if (metrics.status === 'fulfilled' && metrics.value.ok) {
      const now = performance.now();
      const { sums, series } = parseMetrics(await metrics.value.text());
      const prev = state.lastMetrics;
      renderCounters(sums, prev && prev.sums, prev ? (now - prev.at) / 1000 : 0);
      state.lastMetrics = { at: now, sums };
      lastSeries = series;
      renderMetricTable(series);
    }
  }

  $('metric-filter').addEventListener('input', () => renderMetricTable(lastSeries));
  $('metrics-details').addEventListener('toggle', () => renderMetricTable(lastSeries));

  window.addEventListener('pagehide', closeMcp);

  // ---- the last minutes (charts) ---------------------------------------

  // The gateway keeps a sample every 10 s for the last 15 minutes
  // (/api/series), so the charts have their history the moment the page
  // opens; the last point is the time since the last sample.
  const SERIES_EVERY_MS = 5000;
  const SVG = 'http://www.w3.org/2000/svg';
  const CHARTS = [
    { id: 'sessions', title: 'Live sessions', unit: '',
      lines: [{ key: 'sessions', label: 'sessions' }] },
    { id: 'packets', title: 'UDP packets per second', unit: '/s',
      lines: [{ key: 'udp_rx_per_s', label: 'from devices' },
        { key: 'udp_tx_per_s', label: 'to devices' }] },
    { id: 'gateway', title: 'The gateway\u2019s share of a turn (mean)', unit: ' ms',
      lines: [{ key: 'listen_stop_ms', n: 'listen_stop_n', label: 'listen stop \u2192 backend' },
        { key: 'tts_start_ms', n: 'tts_start_n', label: 'tts start \u2192 device' },
        { key: 'first_audio_ms', n: 'first_audio_n', label: 'first audio frame \u2192 UDP' }] },
    { id: 'first-audio', title: 'tts start \u2192 first audio sent (mean)', unit: ' ms',
      lines: [{ key: 'tts_to_audio_ms', n: 'tts_to_audio_n', label: 'tts start \u2192 first audio' }] },
  ];
  const W = 320, H = 120, PAD_L = 38, PAD_R = 6, PAD_T = 8, PAD_B = 18;

  function svg(tag, attrs = {}, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function figure(v, unit) {
    if (v === null || v === undefined) return '—';
    const digits = v >= 100 ? 0 : v >= 10 ? 1 : 2;
    return Number(v).toFixed(unit === '' ? 0 : digits) + unit;
  }

  function clock(t) {
    return new Date(t).toLocaleTimeString('en-GB');
  }

  // One chart: a line per series over time, a point per sample (its
  // figures in its title), the y axis from 0 to the largest figure.
  function chart(def, doc) {
    const samples = doc.samples;
    const span = (doc.interval_s || 10) * (doc.max_samples || 90) * 1000;
    const t1 = samples[samples.length - 1].t, t0 = t1 - span;
    let max = 0;
    for (const s of samples) {
      for (const l of def.lines) {
        if (typeof s[l.key] === 'number') max = Math.max(max, s[l.key]);
      }
    }
    max = max > 0 ? max * 1.1 : 1;
    const x = (t) => PAD_L + (Math.max(t, t0) - t0) / span * (W - PAD_L - PAD_R);
    const y = (v) => PAD_T + (1 - v / max) * (H - PAD_T - PAD_B);
    const titleId = `chart-${def.id}-title`, descId = `chart-${def.id}-desc`;
    const box = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart',
      'data-chart': def.id, 'aria-labelledby': `${titleId} ${descId}` });
    const latest = def.lines.map((l) => {
      const last = [...samples].reverse().find((s) => typeof s[l.key] === 'number');
      return `${l.label}: ${last ? figure(last[l.key], def.unit) : 'no data'}`;
    });
    box.append(svg('title', { id: titleId }, def.title),
      svg('desc', { id: descId }, `Last ${Math.round(span / 60000)} minutes. ` +
        latest.join('; ') + '.'));
    box.append(svg('line', { class: 'axis', x1: PAD_L, x2: W - PAD_R, y1: y(0), y2: y(0) }),
      svg('line', { class: 'grid', x1: PAD_L, x2: W - PAD_R, y1: y(max / 1.1), y2: y(max / 1.1) }),
      svg('text', { class: 'tick', x: PAD_L - 4, y: y(0) + 4, 'text-anchor': 'end' }, '0'),
      svg('text', { class: 'tick', x: PAD_L - 4, y: y(max / 1.1) + 4, 'text-anchor': 'end' },
        figure(max / 1.1, def.unit === '' ? '' : ' ').trim()),
      svg('text', { class: 'tick', x: PAD_L, y: H - 4 }, `\u2212${Math.round(span / 60000)} min`),
      svg('text', { class: 'tick', x: W - PAD_R, y: H - 4, 'text-anchor': 'end' }, 'now'));
    def.lines.forEach((l, i) => {
      let d = '';
      let pen = false;
      const points = svg('g', { class: `points series-${i}`, 'data-key': l.key });
      for (const s of samples) {
        const v = s[l.key];
        if (typeof v !== 'number') {
          pen = false;
          continue;
        }
        d += `${pen ? 'L' : 'M'}${x(s.t).toFixed(1)},${y(v).toFixed(1)}`;
        pen = true;
        const dot = svg('circle', { cx: x(s.t).toFixed(1), cy: y(v).toFixed(1), r: 2.2 });
        dot.append(svg('title', {}, `${clock(s.t)}${s.partial ? ' (so far)' : ''}: ` +
          `${l.label} ${figure(v, def.unit)}` + (l.n ? `, ${s[l.n]} turns` : '')));
        points.append(dot);
      }
      box.append(svg('path', { class: `line series-${i}`, 'data-key': l.key, d }), points);
    });
    const legend = el('ul', { class: 'legend' }, ...def.lines.map((l, i) => {
      const last = [...samples].reverse().find((s) => typeof s[l.key] === 'number');
      const turns = l.n ? samples.reduce((a, s) => a + (s[l.n] || 0), 0) : null;
      return el('li', { 'data-key': l.key },
        el('span', { class: `swatch series-${i}`, ariaHidden: 'true' }),
        el('span', { text: l.label + ' ' }),
        el('strong', { class: 'figure', 'data-key': l.key,
          text: last ? figure(last[l.key], def.unit) : '—' }),
        turns !== null ? el('span', { class: 'muted turns', 'data-key': l.key,
          text: ` (${turns} turns)` }) : null);
    }));
    return el('figure', { class: 'chart-box', 'data-chart': def.id },
      el('figcaption', { text: def.title }), box, legend);
  }

  async function refreshSeries() {
    let doc;
    try {
      const res = await call('api/series');
      doc = await json(res);
      if (!res.ok) throw new Error((doc && doc.error) || 'HTTP ' + res.status);
    } catch (err) {
      if (err instanceof AuthError) throw err;
      $('charts-error').textContent = 'Charts: ' + err.message;
      return;
    }
    $('charts-error').textContent = '';
    if (!doc || !Array.isArray(doc.samples) || doc.samples.length === 0) return;
    $('charts').replaceChildren(...CHARTS.map((c) => chart(c, doc)));
  }

  // ---- start -----------------------------------------------------------

  if (state.token) {
    start();
  } else {
    showLogin('');
  }
})();
