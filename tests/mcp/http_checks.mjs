#!/usr/bin/env node
// Raw HTTP checks of hybridgw's HTTP surface with fetch(): the Streamable
// HTTP rules of the MCP server (sessions, protocol versions, Origin,
// bearer, the GET stream), /healthz, /metrics, /api/devices and the
// manager-api routes with their daily token. Prints "ok - ..." or
// "not ok - ..." per check and exits 1 if any failed.
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';

const VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'];
// Only bounds a request that never comes back: a loaded machine answers
// late, but it answers.
const TIMEOUT_MS = 30000;

function usage(out) {
    out.write(`usage: node http_checks.mjs --base URL --token T --manager-key K --device ID

  --base URL          the gateway's HTTP API, e.g. http://127.0.0.1:8007
  --token T           http.token (bearer of /mcp, /metrics, /api/devices)
  --manager-key K     http.manager_key (daily token of the manager-api routes)
  --device ID         the MQTT client id of a device that is online (with
                      or without a voice session)
  -h, --help          this text

Prints one "ok - what" or "not ok - what (detail)" line per check, then
"N passed, N failed"; exit 0 when all passed, 1 if not, 2 on bad usage.
`);
}

let passed = 0;
let failed = 0;

function check(what, cond, detail = '') {
    if (cond) {
        passed++;
        console.log(`ok - ${what}`);
    } else {
        failed++;
        console.log(`not ok - ${what}${detail ? ` (${detail})` : ''}`);
    }
}

// sha256 hex of "YYYY-MM-DD" + key, for the UTC day `offset` days away.
function dailyToken(key, offset = 0) {
    const day = new Date(Date.now() + offset * 86400000).toISOString().slice(0, 10);
    return createHash('sha256').update(day + key).digest('hex');
}

async function request(url, { method = 'GET', headers = {}, body } = {}) {
    const init = { method, headers, signal: AbortSignal.timeout(TIMEOUT_MS) };
    if (body !== undefined) {
        init.body = typeof body === 'string' ? body : JSON.stringify(body);
    }
    return fetch(url, init);
}

// The JSON-RPC message of a POST answer, sent as JSON or as an SSE stream.
async function rpcBody(res) {
    const type = res.headers.get('content-type') ?? '';
    if (type.startsWith('application/json')) {
        return res.json();
    }
    if (!type.startsWith('text/event-stream') || !res.body) {
        await res.body?.cancel();
        return null;
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    try {
        for (;;) {
            const { value, done } = await reader.read();
            if (done) {
                break;
            }
            text += value;
            for (const block of text.split(/\r?\n\r?\n/).slice(0, -1)) {
                const data = block
                    .split(/\r?\n/)
                    .filter((l) => l.startsWith('data:'))
                    .map((l) => l.slice(5).trimStart())
                    .join('\n');
                if (data) {
                    const msg = JSON.parse(data);
                    if ('result' in msg || 'error' in msg) {
                        return msg;
                    }
                }
            }
        }
    } finally {
        reader.cancel().catch(() => {});
    }
    return null;
}

class Mcp {
    constructor(base, token) {
        this.base = base;
        this.token = token;
        this.nextId = 1;
    }

    headers(extra = {}) {
        const h = {
            'Content-Type': 'application/json',
            Accept: 'application/json, text/event-stream',
            ...extra,
        };
        if (this.token !== undefined && !('Authorization' in extra)) {
            h.Authorization = `Bearer ${this.token}`;
        }
        for (const [k, v] of Object.entries(h)) {
            if (v === undefined) {
                delete h[k];
            }
        }
        return h;
    }

    post(path, body, extra) {
        return request(this.base + path, { method: 'POST', headers: this.headers(extra), body });
    }

    req(method, params) {
        const m = { jsonrpc: '2.0', id: this.nextId++, method };
        if (params !== undefined) {
            m.params = params;
        }
        return m;
    }

    // initialize; returns {res, msg, session} with the session id header.
    async initialize(path, version, extra = {}) {
        const res = await this.post(
            path,
            this.req('initialize', {
                protocolVersion: version,
                capabilities: {},
                clientInfo: { name: 'hybridgw-http-checks', version: '1.0.0' },
            }),
            extra,
        );
        const session = res.headers.get('mcp-session-id');
        const msg = res.ok ? await rpcBody(res) : (await res.body?.cancel(), null);
        return { res, msg, session };
    }

    // A ready session: initialize and notifications/initialized.
    async open(path, version) {
        const init = await this.initialize(path, version);
        const note = await this.post(
            path,
            { jsonrpc: '2.0', method: 'notifications/initialized' },
            { 'Mcp-Session-Id': init.session, 'MCP-Protocol-Version': version },
        );
        await note.body?.cancel();
        return { ...init, noteStatus: note.status };
    }
}

async function status(promise) {
    const res = await promise;
    await res.body?.cancel();
    return res.status;
}

async function checkAuth(mcp) {
    const init = mcp.req('initialize', {
        protocolVersion: VERSIONS[0],
        capabilities: {},
        clientInfo: { name: 'x', version: '1' },
    });
    let s = await status(mcp.post('/mcp', init, { Authorization: undefined }));
    check('POST /mcp without a bearer token is refused with 401', s === 401, `got ${s}`);
    s = await status(mcp.post('/mcp', init, { Authorization: 'Bearer wrong-token' }));
    check('POST /mcp with a wrong bearer token is refused with 401', s === 401, `got ${s}`);
    s = await status(mcp.post('/mcp', init, { Origin: 'http://evil.example.com' }));
    check('POST /mcp from a foreign Origin is refused with 403', s === 403, `got ${s}`);
    const local = await mcp.initialize('/mcp', VERSIONS[0], { Origin: 'http://localhost' });
    check('an Origin on localhost is accepted', local.res.status === 200, `got ${local.res.status}`);
}

async function checkSession(mcp) {
    const v = VERSIONS[0];
    const { res, msg, session, noteStatus } = await mcp.open('/mcp', v);
    check('initialize answers 200', res.status === 200, `got ${res.status}`);
    check(
        'initialize gives an Mcp-Session-Id of visible ASCII',
        typeof session === 'string' && /^[\x21-\x7e]+$/.test(session),
        `got ${session}`,
    );
    check(`initialize negotiates ${v}`, msg?.result?.protocolVersion === v, JSON.stringify(msg));
    check('the server has the tools capability', msg?.result?.capabilities?.tools !== undefined);
    check('notifications/initialized is answered 202', noteStatus === 202, `got ${noteStatus}`);
    const hdr = { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': v };
    let r = await mcp.post('/mcp', mcp.req('tools/list'), hdr);
    const list = r.ok ? await rpcBody(r) : null;
    check(
        'tools/list in the session answers a list of tools',
        r.status === 200 && Array.isArray(list?.result?.tools),
        `got ${r.status} ${JSON.stringify(list)?.slice(0, 200)}`,
    );
    let s = await status(mcp.post('/mcp', mcp.req('tools/list'), { 'MCP-Protocol-Version': v }));
    check('a request without Mcp-Session-Id gets 400', s === 400, `got ${s}`);
    s = await status(mcp.post('/mcp', mcp.req('tools/list'), { ...hdr, 'Mcp-Session-Id': 'no-such-session' }));
    check('an unknown Mcp-Session-Id gets 404', s === 404, `got ${s}`);
    s = await status(mcp.post('/mcp', mcp.req('tools/list'), { ...hdr, 'MCP-Protocol-Version': '1999-01-01' }));
    check('an unsupported MCP-Protocol-Version header gets 400', s === 400, `got ${s}`);
    await checkStream(mcp, hdr);
    s = await status(request(mcp.base + '/mcp', { method: 'DELETE', headers: mcp.headers(hdr) }));
    check('DELETE ends the session (200 or 204)', s === 200 || s === 204, `got ${s}`);
    s = await status(mcp.post('/mcp', mcp.req('tools/list'), hdr));
    check('the deleted session then gets 404', s === 404, `got ${s}`);
}

async function checkStream(mcp, hdr) {
    let s = await status(
        request(mcp.base + '/mcp', { headers: mcp.headers({ ...hdr, Accept: 'application/json' }) }),
    );
    check('GET /mcp without Accept text/event-stream is refused (400 or 406)', s === 400 || s === 406, `got ${s}`);
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS); // until the head
    const res = await fetch(mcp.base + '/mcp', {
        headers: mcp.headers({ ...hdr, Accept: 'text/event-stream' }),
        signal: ctl.signal,
    }).finally(() => clearTimeout(timer));
    const type = res.headers.get('content-type') ?? '';
    check(
        'GET /mcp with Accept text/event-stream opens a stream',
        res.status === 200 && type.startsWith('text/event-stream'),
        `got ${res.status} ${type}`,
    );
    ctl.abort();
}

async function checkVersions(mcp) {
    for (const v of VERSIONS) {
        const { res, msg, session, noteStatus } = await mcp.open('/mcp', v);
        check(`initialize with ${v} negotiates ${v}`, res.status === 200 && msg?.result?.protocolVersion === v,
            `got ${res.status} ${JSON.stringify(msg?.result?.protocolVersion)}`);
        check(`${v}: notifications/initialized gets 202`, noteStatus === 202, `got ${noteStatus}`);
        const r = await mcp.post('/mcp', mcp.req('tools/list'), { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': v });
        const body = r.ok ? await rpcBody(r) : (await r.body?.cancel(), null);
        check(`${v}: tools/list with the version header works`, Array.isArray(body?.result?.tools), `got ${r.status}`);
        if (v === '2025-03-26') {
            // No header: the server must assume 2025-03-26 (spec 2025-06-18).
            const r2 = await mcp.post('/mcp', mcp.req('tools/list'), { 'Mcp-Session-Id': session });
            await r2.body?.cancel();
            check('2025-03-26: a request without MCP-Protocol-Version is accepted', r2.status === 200, `got ${r2.status}`);
        }
    }
    const { res, msg } = await mcp.initialize('/mcp', '2023-01-01');
    check(
        'an unknown protocolVersion is answered with one the server supports',
        res.status === 200 && VERSIONS.includes(msg?.result?.protocolVersion),
        `got ${res.status} ${JSON.stringify(msg)}`,
    );
}

async function checkDeviceEndpoint(mcp, device) {
    const path = `/mcp/devices/${encodeURIComponent(device)}`;
    const { res, session } = await mcp.open(path, VERSIONS[0]);
    check(`initialize on ${path} answers 200`, res.status === 200, `got ${res.status}`);
    const r = await mcp.post(path, mcp.req('tools/list'), { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': VERSIONS[0] });
    const body = r.ok ? await rpcBody(r) : null;
    const names = (body?.result?.tools ?? []).map((t) => t.name);
    check('the device endpoint lists the device tools by their own names', names.includes('self.audio_speaker.set_volume'), names.join(','));
    check('user-only tools are hidden from it', !names.includes('self.reboot') && !names.includes('self.get_system_info'), names.join(','));
    const s = await status(mcp.post('/mcp/devices/GID_none@@@00_00_00_00_00_00@@@none', mcp.req('initialize', {
        protocolVersion: VERSIONS[0], capabilities: {}, clientInfo: { name: 'x', version: '1' },
    })));
    check('an unknown device endpoint gets 404', s === 404, `got ${s}`);
}

async function checkOps(base, token, device) {
    let res = await request(base + '/healthz');
    check('GET /healthz answers 200 without a token', res.status === 200, `got ${res.status}`);
    const brief = await res.json();
    check('saying only the status', JSON.stringify(Object.keys(brief)) === '["status"]',
        JSON.stringify(brief));
    const auth = { Authorization: `Bearer ${token}` };
    res = await request(base + '/healthz', { headers: auth });
    const whole = await res.json();
    check('GET /healthz with the token says the backends and the broker',
        res.status === 200 && Array.isArray(whole.backends) && whole.broker === 'up',
        JSON.stringify(whole));
    let s = await status(request(base + '/metrics'));
    check('GET /metrics without the token gets 401', s === 401, `got ${s}`);
    res = await request(base + '/metrics', { headers: auth });
    const text = await res.text();
    check('GET /metrics answers 200 in the Prometheus text format',
        res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/plain'),
        `got ${res.status} ${res.headers.get('content-type')}`);
    check('/metrics has hybridgw_ families with # TYPE lines', /^# TYPE hybridgw_\w+ (counter|gauge|histogram)/m.test(text));
    check('/metrics counts MCP requests', /^hybridgw_mcp_\w+/m.test(text), text.split('\n').filter((l) => l.includes('mcp')).slice(0, 3).join(' | '));
    check('every /metrics sample line is name{labels} value',
        text.split('\n').filter((l) => l && !l.startsWith('#')).every((l) => /^[a-zA-Z_:][\w:]*(\{.*\})? [-+0-9.eEInfa]+$/.test(l)));
    s = await status(request(base + '/api/devices'));
    check('GET /api/devices without the token gets 401', s === 401, `got ${s}`);
    res = await request(base + '/api/devices', { headers: auth });
    const devices = await res.text();
    check('GET /api/devices lists the online device', res.status === 200 && devices.includes(device), `got ${res.status}`);
}

async function checkManager(base, key, device) {
    const body = { clientIds: [device, 'GID_none@@@00_00_00_00_00_00@@@none'] };
    const post = (path, token, b = body) =>
        request(base + path, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
            body: b,
        });
    for (const [what, offset] of [['today', 0], ['yesterday', -1], ['tomorrow', 1]]) {
        const res = await post('/api/devices/status', dailyToken(key, offset));
        const j = res.ok ? await res.json() : (await res.body?.cancel(), null);
        check(`POST /api/devices/status with ${what}'s daily token answers 200`, res.status === 200, `got ${res.status}`);
        if (offset === 0) {
            // isAlive means a live voice session (as in the Node gateway).
            check('the online device exists', j?.[device]?.exists === true && typeof j?.[device]?.isAlive === 'boolean', JSON.stringify(j));
            check('an unknown device is neither',
                j?.[body.clientIds[1]]?.isAlive === false && j?.[body.clientIds[1]]?.exists === false, JSON.stringify(j));
        }
    }
    let s = await status(post('/api/devices/status', dailyToken(key, -2)));
    check('a daily token two days old gets 401', s === 401, `got ${s}`);
    s = await status(post('/api/devices/status', dailyToken('not-the-key')));
    check('a daily token made with another key gets 401', s === 401, `got ${s}`);
    s = await status(post('/api/devices/status', undefined));
    check('/api/devices/status without a token gets 401', s === 401, `got ${s}`);
    const cmd = { type: 'mcp', payload: { method: 'tools/list', params: { withUserTools: true } } };
    s = await status(post(`/api/commands/${encodeURIComponent(device)}`, 'f'.repeat(64), cmd));
    check('POST /api/commands with a bad daily token gets 401', s === 401, `got ${s}`);
}

async function main() {
    let v;
    try {
        ({ values: v } = parseArgs({
            options: {
                base: { type: 'string' },
                token: { type: 'string' },
                'manager-key': { type: 'string' },
                device: { type: 'string' },
                help: { type: 'boolean', short: 'h', default: false },
            },
        }));
    } catch (err) {
        process.stderr.write(`http_checks.mjs: ${err.message}\n`);
        usage(process.stderr);
        return 2;
    }
    if (v.help) {
        usage(process.stdout);
        return 0;
    }
    if (!v.base || !v.token || !v['manager-key'] || !v.device) {
        usage(process.stderr);
        return 2;
    }
    const base = v.base.replace(/\/$/, '');
    const mcp = new Mcp(base, v.token);
    const groups = [
        ['authentication', () => checkAuth(mcp)],
        ['session', () => checkSession(mcp)],
        ['protocol versions', () => checkVersions(mcp)],
        ['device endpoint', () => checkDeviceEndpoint(mcp, v.device)],
        ['operations', () => checkOps(base, v.token, v.device)],
        ['manager-api', () => checkManager(base, v['manager-key'], v.device)],
    ];
    for (const [name, run] of groups) {
        try {
            await run();
        } catch (err) {
            check(`${name} checks ran to the end`, false, err?.message ?? String(err));
        }
    }
    console.log(`${passed} passed, ${failed} failed`);
    return failed === 0 ? 0 : 1;
}

process.exitCode = await main();
process.exit();
