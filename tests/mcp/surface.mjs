#!/usr/bin/env node
// The whole MCP surface of hybridgw's MCP server, seen by the official
// SDK's Client over Streamable HTTP: a device that is an esp-mcp-like MCP
// server (resources, templates, prompts, completion, logging, progress,
// cancellation, tasks, and its own requests to its client: sampling,
// elicitation, roots) and a stock xiaozhi device that offers tools only,
// on /mcp/devices/{clientId} and on /mcp. Prints "ok - ..." or
// "not ok - ..." per check; see usage().
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    CallToolResultSchema,
    CreateMessageRequestSchema,
    CreateTaskResultSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema,
    LoggingMessageNotificationSchema,
    McpError,
    PromptListChangedNotificationSchema,
    ResourceListChangedNotificationSchema,
    ResourceUpdatedNotificationSchema,
    TaskStatusNotificationSchema,
    ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

// Bounds of waits for answers and notifications that must come: generous,
// they only cost time when something is broken.
const REQ_MS = 15000;
const EVENT_MS = 10000;
// "At once": an answer that waits on nobody, on a loaded machine.
const AT_ONCE_MS = 5000;

function usage(out) {
    out.write(`usage: node surface.mjs --base URL --token T --part PART [options]

  --base URL               the gateway's HTTP API, e.g. http://127.0.0.1:8007
  --token T                http.token (bearer of /mcp)
  --part main              the checks on an esp-profile device (--esp ID) and a
                           stock device (--stock ID)
    --big-bytes N          size of the esp device's device://big.txt (4096)
    --big-limit N          mcp.max_resource_bytes, smaller than that (2048)
    --device-request-ms N  mcp.device_request_timeout_ms (60000)
    --manager-key K        http.manager_key: also compare a blob with the
                           device's own answer through /api/commands
  --part changes           holds a GET stream on /mcp and prints
                           "# stream_open"; waits for the esp device
                           --device ID to come online, then for the tool,
                           resource and prompt it adds later
                           (--mcp-change-after-ms) to be announced and
                           listed, on its endpoint and on /mcp
    --wait-ms N            bound of the whole wait (30000)
  --deadline-ms N          the run ends (failed) after N ms (90000)
  -h, --help               this text

Prints one "ok - what" or "not ok - what (detail)" line per check, "# "
notes, then "N passed, N failed"; exit 0 when all passed, 1 if not, 2 on
bad usage.
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
    return Boolean(cond);
}

function note(text) {
    console.log(`# ${text}`);
}

function errText(err) {
    if (err instanceof McpError) {
        return `error ${err.code}: ${err.message}`;
    }
    return err?.message ?? String(err);
}

// check() on what an async step gives, [cond, detail]; a throw fails it.
async function step(what, fn) {
    try {
        const [cond, detail] = await fn();
        return check(what, cond, detail);
    } catch (err) {
        return check(what, false, `threw: ${errText(err)}`);
    }
}

// [cond, detail] of a request that must be refused with `code` and a
// message passing `test`.
async function refused(promise, code, test = () => true) {
    try {
        const r = await promise;
        return [false, `answered ${JSON.stringify(r).slice(0, 200)}`];
    } catch (err) {
        return [err instanceof McpError && err.code === code && test(err.message), errText(err)];
    }
}

function textOf(result) {
    return (result?.content ?? [])
        .filter((c) => c.type === 'text')
        .map((c) => c.text)
        .join('');
}

function canon(v) {
    if (Array.isArray(v)) {
        return v.map(canon);
    }
    if (v !== null && typeof v === 'object') {
        return Object.fromEntries(
            Object.keys(v)
                .sort()
                .map((k) => [k, canon(v[k])])
        );
    }
    return v;
}

function same(a, b) {
    return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

const json = (v) => JSON.stringify(v ?? null).slice(0, 400);

// The device's label on /mcp begins with the 12 hex digits of its MAC,
// the middle part of a xiaozhi client id (GID@@@aa_bb_..@@@uuid).
function macOf(clientId) {
    return (clientId.split('@@@')[1] ?? '').replaceAll('_', '').toLowerCase();
}

// Resolves once the signal aborts, or after ms.
function aborted(signal, ms) {
    return new Promise((resolve) => {
        const timer = setTimeout(resolve, ms);
        signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
        });
    });
}

// A session: the SDK Client on one endpoint, with every notification and
// request it gets recorded in order; until() waits for one, bounded.
class Session {
    constructor(name) {
        this.name = name;
        this.events = [];
        this.waiters = [];
        this.errors = [];
    }

    push(ev) {
        ev.at = this.events.length;
        this.events.push(ev);
        this.waiters = this.waiters.filter((w) => !w());
    }

    // The first event at index >= from that pred accepts, or null after ms.
    until(pred, ms = EVENT_MS, from = 0) {
        const find = () => this.events.slice(from).find(pred) ?? null;
        const hit = find();
        if (hit) {
            return Promise.resolve(hit);
        }
        return new Promise((resolve) => {
            const timer = setTimeout(() => resolve(null), ms);
            this.waiters.push(() => {
                const ev = find();
                if (ev) {
                    clearTimeout(timer);
                    resolve(ev);
                }
                return ev !== null;
            });
        });
    }

    count(pred, from = 0) {
        return this.events.slice(from).filter(pred).length;
    }

    mark() {
        return this.events.length;
    }

    streamOpen() {
        return this.until((e) => e.kind === 'stream_open');
    }

    async close() {
        await this.transport?.terminateSession().catch(() => {});
        await this.client?.close().catch(() => {});
    }
}

const REQUEST_SCHEMAS = {
    sampling: CreateMessageRequestSchema,
    elicitation: ElicitRequestSchema,
    roots: ListRootsRequestSchema,
};

// A connected Session on url: caps are the client capabilities of its
// initialize, handlers {sampling, elicitation, roots} its request
// handlers, called (request, extra, session).
async function open(url, token, { caps = {}, handlers = {}, name = 'surface' } = {}) {
    const s = new Session(name);
    // Tells when the GET stream (server -> client messages) is open.
    const watchingFetch = async (u, init) => {
        const res = await fetch(u, init);
        const type = res.headers.get('content-type') ?? '';
        if ((init?.method ?? 'GET') === 'GET' && res.ok && type.startsWith('text/event-stream')) {
            s.push({ kind: 'stream_open' });
        }
        return res;
    };
    s.transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
        fetch: watchingFetch,
        reconnectionOptions: {
            maxReconnectionDelay: 1000,
            initialReconnectionDelay: 200,
            reconnectionDelayGrowFactor: 1.5,
            maxRetries: 2,
        },
    });
    const client = new Client({ name, version: '1.0.0' }, { capabilities: caps });
    client.onerror = (err) => s.errors.push(errText(err));
    const record = (schema, kind, extra = {}) =>
        client.setNotificationHandler(schema, (n) => s.push({ kind, params: n.params, ...extra }));
    record(ResourceUpdatedNotificationSchema, 'updated');
    record(LoggingMessageNotificationSchema, 'log');
    record(TaskStatusNotificationSchema, 'task_status');
    record(ToolListChangedNotificationSchema, 'changed', { list: 'tools' });
    record(ResourceListChangedNotificationSchema, 'changed', { list: 'resources' });
    record(PromptListChangedNotificationSchema, 'changed', { list: 'prompts' });
    for (const [what, fn] of Object.entries(handlers)) {
        client.setRequestHandler(REQUEST_SCHEMAS[what], async (req, extra) => {
            s.push({ kind: 'request', what, params: req.params, id: extra.requestId });
            return fn(req, extra, s);
        });
    }
    await client.connect(s.transport, { timeout: REQ_MS });
    s.client = client;
    return s;
}

// Every page of a list method's items.
async function listAll(client, method, key) {
    const items = [];
    const seen = new Set();
    let cursor;
    do {
        const page = await client[method](cursor ? { cursor } : {}, { timeout: REQ_MS });
        items.push(...page[key]);
        cursor = page.nextCursor;
        if (cursor !== undefined && seen.has(cursor)) {
            throw new Error(`${method}: cursor ${cursor} repeats`);
        }
        seen.add(cursor);
    } while (cursor);
    return items;
}

async function call(session, name, args = {}, options = {}) {
    const t0 = performance.now();
    const result = await session.client.callTool({ name, arguments: args }, CallToolResultSchema, {
        timeout: REQ_MS,
        ...options,
    });
    return { result, text: textOf(result), ms: Math.round(performance.now() - t0) };
}

const isLog = (level, tool) => (e) =>
    e.kind === 'log' &&
    e.params.level === level &&
    (tool === undefined || String(e.params.data).includes(`tools/call ${tool}`));
const isRequest = (what) => (e) => e.kind === 'request' && e.what === what;

// A barrier on a session with logging at info: the log line of a later
// tool call (made by `by`) reached the session's GET stream, so whatever
// the device sent before that call did too. False if it did not come.
async function barrier(session, by, tool) {
    const from = session.mark();
    await call(by, tool);
    return (await session.until(isLog('info', tool), EVENT_MS, from)) !== null;
}

const ESP_CAPS = {
    tools: { listChanged: true },
    resources: { subscribe: true, listChanged: true },
    prompts: { listChanged: true },
    completions: {},
    logging: {},
    tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
};
const ROOTS = [
    { uri: 'file:///srv/projects/hybridgw', name: 'hybridgw' },
    { uri: 'file:///srv/projects/notes', name: 'notes' },
];
const ANSWER = 'Paris, says the test client';

// The sampling handler of the capable session: answers; a question that
// starts with "withdraw:" is held until the request is cancelled (or a
// bound), which it records.
async function samplingHandler(req, extra, s) {
    const q = req.params.messages?.[0]?.content?.text ?? '';
    if (q.startsWith('withdraw:')) {
        await aborted(extra.signal, EVENT_MS);
        s.push({ kind: 'withdrawn', aborted: extra.signal.aborted });
    }
    return {
        role: 'assistant',
        content: { type: 'text', text: ANSWER },
        model: 'surface-test-model',
        stopReason: 'endTurn',
    };
}

// The sampling handler of a session that never answers: it waits for the
// request to be cancelled (or a bound); on a question that starts with
// "leave:" its session ends meanwhile.
async function hangingHandler(req, extra, s) {
    const q = req.params.messages?.[0]?.content?.text ?? '';
    if (q.startsWith('leave:')) {
        setImmediate(() => s.close());
    }
    await aborted(extra.signal, EVENT_MS);
    s.push({ kind: 'withdrawn', aborted: extra.signal.aborted });
    return { role: 'assistant', content: { type: 'text', text: 'too late' }, model: 'test' };
}

// ---- part main ----

// A group of checks: a session that cannot be opened (or a throw outside
// a check) is one failed check, and the other groups still run.
async function section(what, fn) {
    try {
        await fn();
    } catch (err) {
        check(`${what}: the checks ran`, false, errText(err));
    }
}

async function partMain(o) {
    const espUrl = `${o.base}/mcp/devices/${encodeURIComponent(o.esp)}`;
    const stockUrl = `${o.base}/mcp/devices/${encodeURIComponent(o.stock)}`;
    const sessions = [];
    const opened = async (url, options) => {
        const s = await open(url, o.token, options);
        sessions.push(s);
        return s;
    };
    try {
        await section('stock device', () => stockChecks(opened, stockUrl));
        await section('no capable client', () => noClientChecks(opened, espUrl));
        let m;
        await section('the capable session', async () => {
            m = await opened(espUrl, {
                caps: { sampling: {}, elicitation: { form: {} }, roots: {} },
                name: 'surface-capable',
                handlers: {
                    sampling: samplingHandler,
                    elicitation: async () => ({ action: 'accept', content: { ok: true } }),
                    roots: async () => ({ roots: ROOTS }),
                },
            });
            check('the capable session holds its GET stream', await m.streamOpen());
            const caps = m.client.getServerCapabilities();
            check('the esp device endpoint announces exactly the device capabilities',
                same(caps, ESP_CAPS), json(caps));
        });
        if (!m) {
            return;
        }
        let blob;
        await section('resources', async () => {
            blob = await resourceChecks(o, m);
        });
        await section('prompts', () => promptChecks(m));
        await section('logging', () => loggingChecks(opened, espUrl, m));
        await section('progress', () => progressChecks(m));
        await section('progress, raw', () => rawProgressChecks(o, espUrl));
        await section('cancellation', () => cancelChecks(m));
        await section('tasks', () => taskChecks(opened, espUrl, m));
        await section('requests to the client', () => clientRequestChecks(o, opened, espUrl, m));
        await section('subscriptions', () => subscribeChecks(opened, espUrl, m));
        await section('/mcp', () => aggregatedChecks(o, opened, blob));
    } finally {
        for (const s of sessions) {
            // Streams that end with their session are no news.
            const errors = s.errors.filter((e) => !/AbortError/.test(e));
            if (errors.length > 0) {
                note(`${s.name}: SDK errors: ${errors.slice(0, 3).join(' | ')}`);
            }
            await s.close();
        }
    }
}

async function stockChecks(opened, url) {
    const s = await opened(url, { name: 'surface-stock' });
    const caps = s.client.getServerCapabilities() ?? {};
    check('a stock device endpoint offers tools only in initialize',
        same(Object.keys(caps), ['tools']), json(caps));
    const offerless = (m) => /does not offer/.test(m);
    await step('a stock device: resources/list is refused with -32601', () =>
        refused(s.client.listResources({}, { timeout: REQ_MS }), -32601, offerless));
    await step('a stock device: prompts/list is refused with -32601', () =>
        refused(s.client.listPrompts({}, { timeout: REQ_MS }), -32601, offerless));
    await step('a stock device: its tools are listed, none of the esp profile', async () => {
        const tools = (await listAll(s.client, 'listTools', 'tools')).map((t) => t.name);
        return [
            tools.includes('self.get_device_status') &&
                tools.includes('self.audio_speaker.set_volume') &&
                !tools.includes('self.sim.count'),
            tools.join(','),
        ];
    });
    await step('a stock device: set_volume 27, then get_device_status says 27', async () => {
        const a = await call(s, 'self.audio_speaker.set_volume', { volume: 27 });
        const b = await call(s, 'self.get_device_status');
        const volume = JSON.parse(b.text)?.audio_speaker?.volume;
        return [a.text === 'true' && volume === 27, `${a.text} / ${b.text}`];
    });
}

const noClient = (r, cap) =>
    r.result.isError === true &&
    /-32006|no MCP client/.test(r.text) &&
    r.text.includes(cap) &&
    r.ms < AT_ONCE_MS;

// Requests of the device to its client while no session can take them.
async function noClientChecks(opened, url) {
    const n = await opened(url, { name: 'surface-plain' });
    await n.streamOpen();
    for (const [tool, args, cap] of [
        ['self.sim.ask', { question: 'anyone there?' }, 'sampling'],
        ['self.sim.confirm', { message: 'anyone there?' }, 'elicitation'],
        ['self.sim.roots', {}, 'roots'],
    ]) {
        await step(`no capable client: ${tool} is an error with -32006 at once`, async () => {
            const r = await call(n, tool, args);
            return [noClient(r, cap), `${r.ms} ms, isError ${r.result.isError}: ${r.text}`];
        });
    }
    // A session that declared roots only answers roots/list, while a
    // sampling request still finds nobody.
    const r = await opened(url, {
        caps: { roots: {} },
        name: 'surface-roots-only',
        handlers: { roots: async () => ({ roots: ROOTS.slice(0, 1) }) },
    });
    check('a roots-only session holds its GET stream', await r.streamOpen());
    await step('a roots-only session: self.sim.ask still gets -32006 at once', async () => {
        const x = await call(r, 'self.sim.ask', { question: 'and now?' });
        return [noClient(x, 'sampling'), `${x.ms} ms: ${x.text}`];
    });
    await step('a roots-only session: self.sim.roots gets its roots', async () => {
        const x = await call(r, 'self.sim.roots');
        const asked = r.count(isRequest('roots'));
        return [
            asked === 1 && x.result.isError !== true && same(JSON.parse(x.text), ROOTS.slice(0, 1)),
            `asked ${asked}: ${x.text}`,
        ];
    });
    await r.close();
    await n.close();
}

// Resources on the device endpoint; gives the blob it read.
async function resourceChecks(o, m) {
    const read = (uri) => m.client.readResource({ uri }, { timeout: REQ_MS });
    await step('resources/list: status (json), snapshot (png) and big.txt', async () => {
        const all = await listAll(m.client, 'listResources', 'resources');
        const by = Object.fromEntries(all.map((r) => [r.uri, r]));
        return [
            by['device://status']?.mimeType === 'application/json' &&
                by['device://snapshot.png']?.mimeType === 'image/png' &&
                by['device://big.txt'] !== undefined,
            all.map((r) => `${r.uri}(${r.mimeType})`).join(','),
        ];
    });
    await step('resources/templates/list: device://sensor/{name}', async () => {
        const all = await listAll(m.client, 'listResourceTemplates', 'resourceTemplates');
        const uris = all.map((x) => x.uriTemplate);
        return [uris.includes('device://sensor/{name}'), uris.join(',')];
    });
    await step('read device://status: one text content, the status JSON', async () => {
        const r = await read('device://status');
        const c = r.contents[0];
        return [
            r.contents.length === 1 &&
                c.uri === 'device://status' &&
                c.blob === undefined &&
                typeof JSON.parse(c.text).touched === 'number',
            json(r),
        ];
    });
    let blob;
    await step('read device://snapshot.png: a base64 blob, image/png, no text', async () => {
        const r = await read('device://snapshot.png');
        const c = r.contents[0];
        blob = c.blob;
        return [
            typeof c.blob === 'string' &&
                c.blob.length > 0 &&
                c.text === undefined &&
                c.mimeType === 'image/png' &&
                Buffer.from(c.blob, 'base64').toString('base64') === c.blob,
            json(r),
        ];
    });
    if (o.managerKey) {
        await step('its bytes equal the device own answer (manager-api)', async () => {
            const raw = await managerCommand(o, o.esp, 'resources/read', {
                uri: 'device://snapshot.png',
            });
            const own = raw?.data?.contents?.[0]?.blob;
            return [typeof own === 'string' && own === blob, `${own} vs ${blob}`];
        });
    }
    const naming = (msg) =>
        new RegExp(`\\b${o.bigLimit}\\b`).test(msg) && new RegExp(`\\b${o.bigBytes}\\b`).test(msg);
    await step(`read device://big.txt (${o.bigBytes} bytes) over mcp.max_resource_bytes ` +
        `${o.bigLimit}: -32603 naming the size and the limit`, () =>
        refused(read('device://big.txt'), -32603, naming));
    await step('read device://sensor/temp through the template', async () => {
        const r = await read('device://sensor/temp');
        return [/^temp=/.test(r.contents[0]?.text ?? ''), json(r)];
    });
    await step("read of an unknown uri: the device's error comes back", async () => {
        try {
            return [false, json(await read('device://nothing'))];
        } catch (err) {
            return [err instanceof McpError && /Resource not found/.test(err.message), errText(err)];
        }
    });
    return blob;
}

async function managerCommand(o, id, method, params) {
    const day = new Date().toISOString().slice(0, 10);
    const token = createHash('sha256').update(day + o.managerKey).digest('hex');
    const res = await fetch(`${o.base}/api/commands/${encodeURIComponent(id)}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ type: 'mcp', payload: { method, params } }),
        signal: AbortSignal.timeout(REQ_MS),
    });
    return res.json();
}

async function promptChecks(m) {
    await step('prompts/list: greeting (name required) and status_report', async () => {
        const all = await listAll(m.client, 'listPrompts', 'prompts');
        const g = all.find((x) => x.name === 'greeting');
        return [
            g?.arguments?.some((a) => a.name === 'name' && a.required === true) &&
                all.some((x) => x.name === 'status_report'),
            json(all),
        ];
    });
    await step('prompts/get greeting {name: Ada}', async () => {
        const r = await m.client.getPrompt(
            { name: 'greeting', arguments: { name: 'Ada' } },
            { timeout: REQ_MS }
        );
        const msg = r.messages[0];
        return [msg?.role === 'user' && msg?.content?.text === 'Say hello to Ada', json(r)];
    });
    const complete = (ref, value) =>
        m.client.complete({ ref, argument: { name: 'name', value } }, { timeout: REQ_MS });
    await step('completion/complete of the prompt argument: al -> alice, alan', async () => {
        const r = await complete({ type: 'ref/prompt', name: 'greeting' }, 'al');
        return [same([...r.completion.values].sort(), ['alan', 'alice']), json(r)];
    });
    await step('completion/complete of the template: t -> temp, tilt', async () => {
        const r = await complete({ type: 'ref/resource', uri: 'device://sensor/{name}' }, 't');
        return [same([...r.completion.values].sort(), ['temp', 'tilt']), json(r)];
    });
}

async function loggingChecks(opened, url, m) {
    const d = await opened(url, { name: 'surface-debug' });
    await d.streamOpen();
    await step('logging/setLevel info (one session) and debug (another)', async () => {
        await m.client.setLoggingLevel('info', { timeout: REQ_MS });
        await d.client.setLoggingLevel('debug', { timeout: REQ_MS });
        return [true, ''];
    });
    const mFrom = m.mark();
    const dFrom = d.mark();
    await call(m, 'self.get_device_status');
    const info = await m.until(isLog('info', 'self.get_device_status'), EVENT_MS, mFrom);
    check('a tool call brings notifications/message at info to the info session',
        info?.params.logger === 'sim', json(info?.params ?? m.events.slice(mFrom)));
    const debug = await d.until(isLog('debug'), EVENT_MS, dFrom);
    check('and its debug message to the debug session', debug !== null,
        json(d.events.slice(dFrom).map((e) => e.params ?? e.kind)));
    const fenced = await barrier(m, m, 'self.get_device_status');
    const seen = m.count(isLog('debug'), mFrom);
    check('the info session never gets the debug message', fenced && seen === 0,
        `barrier ${fenced}, debug seen ${seen}`);
    await d.close();
}

async function progressChecks(m) {
    await step('progress: self.sim.count 5 steps, each in order under the client token', async () => {
        const seen = [];
        const r = await call(m, 'self.sim.count', { steps: 5, interval_ms: 20 }, {
            onprogress: (p) => seen.push(p),
        });
        return [
            r.text === 'counted 5' &&
                same(seen.map((p) => p.progress), [1, 2, 3, 4, 5]) &&
                seen.every((p, i) => p.total === 5 && p.message === `step ${i + 1}`),
            `${r.text}; ${json(seen)}`,
        ];
    });
}

// Progress without text/event-stream in the POST's Accept, raw: the
// answer is JSON, the progress (under the client's own string token)
// comes on the session's GET stream.
async function rawProgressChecks(o, url) {
    const v = '2025-11-25';
    const base = { Authorization: `Bearer ${o.token}`, 'Content-Type': 'application/json' };
    const post = (body, headers) =>
        fetch(url, {
            method: 'POST',
            headers: { ...base, Accept: 'application/json, text/event-stream', ...headers },
            body: JSON.stringify(body),
            signal: AbortSignal.timeout(REQ_MS),
        });
    const init = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: v, capabilities: {}, clientInfo: { name: 'surface-raw', version: '1' } },
    });
    await init.body?.cancel();
    const sid = init.headers.get('mcp-session-id');
    const hdr = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': v };
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, hdr)).body?.cancel();
    const stream = new AbortController();
    const raw = new Session('surface-raw');
    let streamOk = false;
    try {
        const get = await fetch(url, {
            headers: { ...base, ...hdr, Accept: 'text/event-stream' },
            signal: stream.signal,
        });
        streamOk = get.ok;
        // The GET stream's messages, read as they come.
        (async () => {
            const reader = get.body.pipeThrough(new TextDecoderStream()).getReader();
            let text = '';
            for (;;) {
                const { value, done } = await reader.read();
                if (done) {
                    return;
                }
                text += value;
                const blocks = text.split(/\r?\n\r?\n/);
                text = blocks.pop();
                for (const b of blocks) {
                    const data = b
                        .split(/\r?\n/)
                        .filter((l) => l.startsWith('data:'))
                        .map((l) => l.slice(5).trimStart())
                        .join('\n');
                    if (data) {
                        raw.push({ kind: 'message', msg: JSON.parse(data) });
                    }
                }
            }
        })().catch(() => {});
        await step('progress without SSE in Accept: a JSON answer, the progress on the GET ' +
            'stream under the client string token', async () => {
            const res = await post(
                {
                    jsonrpc: '2.0',
                    id: 2,
                    method: 'tools/call',
                    params: {
                        name: 'self.sim.count',
                        arguments: { steps: 3, interval_ms: 20 },
                        _meta: { progressToken: 'raw-token' },
                    },
                },
                { ...hdr, Accept: 'application/json' }
            );
            const type = res.headers.get('content-type') ?? '';
            const body = await res.json();
            const isProgress = (e) => e.msg.method === 'notifications/progress';
            const progress = () =>
                raw.events.filter(isProgress).map((e) => [e.msg.params.progressToken, e.msg.params.progress]);
            // Sent before the answer, on another stream: read by now or soon.
            await raw.until((e) => isProgress(e) && e.msg.params.progress === 3);
            return [
                streamOk &&
                    type.startsWith('application/json') &&
                    textOf(body.result) === 'counted 3' &&
                    same(progress(), [['raw-token', 1], ['raw-token', 2], ['raw-token', 3]]),
                `GET ${streamOk}, ${type}: ${json(body)}; ${json(progress())}`,
            ];
        });
    } finally {
        stream.abort();
        await fetch(url, { method: 'DELETE', headers: { ...base, ...hdr } }).catch(() => {});
    }
}

// The device learning of it is checked by the test script (its
// transcript and counters).
async function cancelChecks(m) {
    const ac = new AbortController();
    let steps = 0;
    const p = call(m, 'self.sim.count', { steps: 50, interval_ms: 200 }, {
        signal: ac.signal,
        onprogress: () => {
            steps++;
            ac.abort('the test changed its mind');
        },
    });
    await step('cancellation: a long self.sim.count sends progress, the client aborts it', async () => {
        try {
            return [false, `answered: ${(await p).text}`];
        } catch (err) {
            return [steps >= 1, `${steps} step(s): ${errText(err)}`];
        }
    });
    await step('the device answers the next call at once', async () => {
        const r = await call(m, 'self.get_device_status');
        return [r.result.isError !== true && r.ms < AT_ONCE_MS, `${r.ms} ms: ${r.text.slice(0, 80)}`];
    });
}

async function taskChecks(opened, url, m) {
    const tasks = m.client.experimental.tasks;
    const options = { task: { ttl: 60000 }, timeout: REQ_MS };
    let id;
    const from = m.mark();
    await step('tasks: self.sim.job with params.task, then its result (SDK callToolStream)', async () => {
        const seen = [];
        let result;
        const stream = tasks.callToolStream(
            { name: 'self.sim.job', arguments: { ms: 300 } },
            CallToolResultSchema,
            options
        );
        for await (const msg of stream) {
            if (msg.type === 'taskCreated' || msg.type === 'taskStatus') {
                seen.push(`${msg.type}:${msg.task.status}`);
                id ??= msg.task.taskId;
            } else if (msg.type === 'result') {
                seen.push('result');
                result = msg.result;
            } else {
                seen.push(`error:${errText(msg.error)}`);
            }
        }
        return [
            /^job-\d+$/.test(id ?? '') &&
                seen[0] === 'taskCreated:working' &&
                textOf(result) === 'job done after 300 ms',
            `${id}: ${seen.join(' ')}`,
        ];
    });
    const status = await m.until(
        (e) => e.kind === 'task_status' && e.params.taskId === id && e.params.status === 'completed',
        EVENT_MS,
        from
    );
    check('notifications/tasks/status completed reaches the session that made the task',
        status !== null, json(m.events.slice(from).filter((e) => e.kind === 'task_status')));
    await step('tasks/get of it: completed', async () => {
        const t = await tasks.getTask(id, { timeout: REQ_MS });
        return [t.taskId === id && t.status === 'completed', json(t)];
    });
    await step('tasks/result of it: the job result', async () => {
        const r = await tasks.getTaskResult(id, CallToolResultSchema, { timeout: REQ_MS });
        return [textOf(r) === 'job done after 300 ms', json(r)];
    });
    await step('tasks/list on the device endpoint lists it', async () => {
        const l = await tasks.listTasks(undefined, { timeout: REQ_MS });
        return [l.tasks.some((t) => t.taskId === id), json(l)];
    });
    await strangerChecks(opened, url, id, '');
    await step('tasks/cancel of a long job: cancelled, and tasks/get says so', async () => {
        const c = await m.client.request(
            { method: 'tools/call', params: { name: 'self.sim.job', arguments: { ms: 30000 } } },
            CreateTaskResultSchema,
            options
        );
        const long = c.task.taskId;
        const x = await tasks.cancelTask(long, { timeout: REQ_MS });
        const g = await tasks.getTask(long, { timeout: REQ_MS });
        return [x.status === 'cancelled' && g.status === 'cancelled', `${long}: ${json(x)} ${json(g)}`];
    });
}

// A task is its creating session's alone: another session on url gets
// "Unknown task" for it, as for an id that never was, and does not list it.
async function strangerChecks(opened, url, id, where) {
    const x = await opened(url, { name: 'surface-stranger' });
    const tasks = x.client.experimental.tasks;
    const unknown = (msg) => /Unknown task/.test(msg);
    await step(`${where}another session: tasks/get of ${id} is an unknown task`, () =>
        refused(tasks.getTask(id, { timeout: REQ_MS }), -32602, unknown));
    await step(`${where}another session: tasks/result of it is an unknown task`, () =>
        refused(tasks.getTaskResult(id, CallToolResultSchema, { timeout: REQ_MS }), -32602, unknown));
    await step(`${where}another session: tasks/cancel of it is an unknown task`, () =>
        refused(tasks.cancelTask(id, { timeout: REQ_MS }), -32602, unknown));
    if (where === '') {
        await step('another session: tasks/list does not list it', async () => {
            const l = await tasks.listTasks(undefined, { timeout: REQ_MS });
            return [!l.tasks.some((t) => t.taskId === id), json(l)];
        });
    }
    await x.close();
}

async function clientRequestChecks(o, opened, url, m) {
    await step('sampling: self.sim.ask runs the client handler with the question, ' +
        'the tool returns its answer', async () => {
        const from = m.mark();
        const question = 'What is the capital of France?';
        const r = await call(m, 'self.sim.ask', { question });
        const req = m.events.slice(from).find(isRequest('sampling'));
        const msg = req?.params?.messages?.[0];
        return [
            msg?.role === 'user' &&
                msg?.content?.text === question &&
                req.params.maxTokens === 64 &&
                r.result.isError !== true &&
                r.text === ANSWER,
            `${json(req?.params)} -> ${r.text}`,
        ];
    });
    await step("sampling: the request carries the gateway's own string id", async () => {
        const req = m.events.filter(isRequest('sampling')).pop();
        return [typeof req?.id === 'string', String(req?.id)];
    });
    // A session without the capability calls; the capable one answers.
    const n = await opened(url, { name: 'surface-caller' });
    await step('sampling from a call of another session reaches the capable session', async () => {
        const from = m.mark();
        const r = await call(n, 'self.sim.ask', { question: 'Who answers?' });
        const asked = m.count(isRequest('sampling'), from);
        return [asked === 1 && r.text === ANSWER, `asked ${asked}: ${r.text}`];
    });
    await n.close();
    await step('elicitation: self.sim.confirm runs the handler (form, ok boolean), ' +
        'the tool returns its answer', async () => {
        const from = m.mark();
        const r = await call(m, 'self.sim.confirm', { message: 'Reboot now?' });
        const p = m.events.slice(from).find(isRequest('elicitation'))?.params ?? {};
        return [
            p.message === 'Reboot now?' &&
                (p.mode ?? 'form') === 'form' &&
                p.requestedSchema?.properties?.ok?.type === 'boolean' &&
                same(JSON.parse(r.text), { action: 'accept', content: { ok: true } }),
            `${json(p)} -> ${r.text}`,
        ];
    });
    await step('roots: self.sim.roots runs the handler, the tool returns the roots', async () => {
        const from = m.mark();
        const r = await call(m, 'self.sim.roots');
        const asked = m.count(isRequest('roots'), from);
        return [asked === 1 && same(JSON.parse(r.text), ROOTS), `asked ${asked}: ${r.text}`];
    });
    await step('self.sim.ask_cancel: the client gets notifications/cancelled for the ' +
        'sampling request', async () => {
        const from = m.mark();
        const r = await call(m, 'self.sim.ask_cancel', {
            question: 'withdraw: are you sure?',
            after_ms: 300,
        });
        const req = await m.until(isRequest('sampling'), EVENT_MS, from);
        // The handler records the abort when it comes (or after its bound).
        const w = await m.until((e) => e.kind === 'withdrawn', EVENT_MS + 1000, from);
        return [req !== null && r.text === 'withdrawn' && w?.aborted === true, `${r.text}; ${json(w)}`];
    });
    // A newer capable session that never answers takes the requests now.
    const w = await opened(url, {
        caps: { sampling: {} },
        name: 'surface-hanging',
        handlers: { sampling: hangingHandler },
    });
    await w.streamOpen();
    const limit = o.deviceRequestMs;
    await step('the newest capable session gets the request; when it never answers, ' +
        'the device gets -32001 after ' +
        `mcp.device_request_timeout_ms (${limit} ms), the client notifications/cancelled`, async () => {
        const from = w.mark();
        const mFrom = m.mark();
        const r = await call(m, 'self.sim.ask', { question: 'hang: are you there?' });
        const asked = w.count(isRequest('sampling'), from);
        const older = m.count(isRequest('sampling'), mFrom);
        const ab = await w.until((e) => e.kind === 'withdrawn', EVENT_MS, from);
        return [
            asked === 1 &&
                older === 0 &&
                r.result.isError === true &&
                /-32001|timed? ?out|in time/i.test(r.text) &&
                r.ms >= limit - 100 &&
                r.ms < limit + 8000 &&
                ab?.aborted === true,
            `${r.ms} ms, asked newest ${asked}, older ${older}: ${r.text}; ${json(ab)}`,
        ];
    });
    await step('a client that goes away meanwhile: the device gets -32006 ' +
        '"the MCP client went away"', async () => {
        const from = w.mark();
        const r = await call(m, 'self.sim.ask', { question: 'leave: are you there?' });
        const asked = w.count(isRequest('sampling'), from);
        return [
            asked === 1 && r.result.isError === true && /went away/.test(r.text) && r.ms < limit,
            `${r.ms} ms: ${r.text}`,
        ];
    });
}

async function subscribeChecks(opened, url, m) {
    const b = await opened(url, { name: 'surface-second' });
    await b.streamOpen();
    await b.client.setLoggingLevel('info', { timeout: REQ_MS });
    const uri = 'device://status';
    const isUpdate = (e) => e.kind === 'updated' && e.params.uri === uri;
    await step('resources/subscribe device://status from two sessions', async () => {
        await m.client.subscribeResource({ uri }, { timeout: REQ_MS });
        await b.client.subscribeResource({ uri }, { timeout: REQ_MS });
        return [true, ''];
    });
    let mFrom = m.mark();
    let bFrom = b.mark();
    await call(m, 'self.sim.touch');
    const u1 = await m.until(isUpdate, EVENT_MS, mFrom);
    const u2 = await b.until(isUpdate, EVENT_MS, bFrom);
    check('self.sim.touch: notifications/resources/updated reaches both subscribers',
        u1 !== null && u2 !== null, `first ${u1 !== null}, second ${u2 !== null}`);
    await b.client.unsubscribeResource({ uri }, { timeout: REQ_MS });
    mFrom = m.mark();
    bFrom = b.mark();
    await call(m, 'self.sim.touch');
    check('after one unsubscribes, the other still gets it',
        (await m.until(isUpdate, EVENT_MS, mFrom)) !== null);
    const fenced = await barrier(b, m, 'self.get_device_status');
    check('and the one that unsubscribed does not', fenced && b.count(isUpdate, bFrom) === 0,
        `barrier ${fenced}, updates ${b.count(isUpdate, bFrom)}`);
    await m.client.unsubscribeResource({ uri }, { timeout: REQ_MS });
    mFrom = m.mark();
    await call(m, 'self.sim.touch');
    const fenced2 = await barrier(m, m, 'self.get_device_status');
    check('after the last unsubscribes, no update comes', fenced2 && m.count(isUpdate, mFrom) === 0,
        `barrier ${fenced2}, updates ${m.count(isUpdate, mFrom)}`);
    await b.close();
}

// The same device through /mcp: renamed resources, prompts, tasks,
// logging, progress, subscriptions.
async function aggregatedChecks(o, opened, blob) {
    const g = await opened(`${o.base}/mcp`, { name: 'surface-all' });
    await g.streamOpen();
    const caps = g.client.getServerCapabilities() ?? {};
    check('/mcp announces tools, resources (subscribe), prompts, completions, logging, ' +
        'tasks without list',
        caps.tools &&
            caps.resources?.subscribe === true &&
            caps.prompts &&
            caps.completions &&
            caps.logging &&
            caps.tasks?.cancel &&
            caps.tasks?.requests?.tools?.call &&
            caps.tasks?.list === undefined,
        json(caps));
    const mac = macOf(o.esp);
    const tools = (await listAll(g.client, 'listTools', 'tools')).map((t) => t.name);
    const first = tools.find((t) => t.startsWith(`${mac}-`));
    const label = first?.slice(0, first.indexOf('.'));
    check(`/mcp: the esp device's label (${label})`, /^[0-9a-f]{12}-[0-9a-f]{16}$/.test(label ?? ''),
        tools.join(','));
    const pre = `hybridgw://${label}/`;
    const read = (uri) => g.client.readResource({ uri: pre + uri }, { timeout: REQ_MS });
    await step('/mcp resources/list: hybridgw://<label>/device://... names', async () => {
        const all = (await listAll(g.client, 'listResources', 'resources')).map((x) => x.uri);
        const want = ['device://status', 'device://snapshot.png', 'device://big.txt'];
        return [want.every((u) => all.includes(pre + u)), all.join(',')];
    });
    await step('/mcp resources/templates/list: hybridgw://<label>/device://sensor/{name}', async () => {
        const all = await listAll(g.client, 'listResourceTemplates', 'resourceTemplates');
        const uris = all.map((x) => x.uriTemplate);
        return [uris.includes(`${pre}device://sensor/{name}`), uris.join(',')];
    });
    await step('/mcp read through the aggregated name: the status text', async () => {
        const r = await read('device://status');
        return [
            r.contents[0]?.uri === `${pre}device://status` &&
                typeof JSON.parse(r.contents[0].text).touched === 'number',
            json(r),
        ];
    });
    await step('/mcp read of the blob: the same bytes, still a blob', async () => {
        const c = (await read('device://snapshot.png')).contents[0];
        return [c.blob === blob && c.text === undefined, json(c)];
    });
    await step('/mcp read of a template uri: hybridgw://<label>/device://sensor/humidity', async () => {
        const r = await read('device://sensor/humidity');
        return [/^humidity=/.test(r.contents[0]?.text ?? ''), json(r)];
    });
    await step('/mcp prompts: <label>.greeting listed and got', async () => {
        const all = (await listAll(g.client, 'listPrompts', 'prompts')).map((x) => x.name);
        const r = await g.client.getPrompt(
            { name: `${label}.greeting`, arguments: { name: 'Bo' } },
            { timeout: REQ_MS }
        );
        return [
            all.includes(`${label}.greeting`) && r.messages[0]?.content?.text === 'Say hello to Bo',
            `${all.join(',')} -> ${json(r.messages)}`,
        ];
    });
    await step('/mcp completion/complete of <label>.greeting: b -> bob', async () => {
        const r = await g.client.complete(
            {
                ref: { type: 'ref/prompt', name: `${label}.greeting` },
                argument: { name: 'name', value: 'b' },
            },
            { timeout: REQ_MS }
        );
        return [same(r.completion.values, ['bob']), json(r)];
    });
    await step('/mcp logging: a message names the logger <label>.sim', async () => {
        await g.client.setLoggingLevel('info', { timeout: REQ_MS });
        const from = g.mark();
        await call(g, `${label}.self.get_device_status`);
        const ev = await g.until(isLog('info', 'self.get_device_status'), EVENT_MS, from);
        return [ev?.params?.logger === `${label}.sim`, json(ev?.params)];
    });
    await step('/mcp progress: <label>.self.sim.count 3 steps', async () => {
        const seen = [];
        const r = await call(g, `${label}.self.sim.count`, { steps: 3, interval_ms: 20 }, {
            onprogress: (p) => seen.push(p.progress),
        });
        return [r.text === 'counted 3' && same(seen, [1, 2, 3]), `${r.text}: ${json(seen)}`];
    });
    await step('/mcp subscribe hybridgw://<label>/device://status: the update comes under ' +
        'that name', async () => {
        const uri = `${pre}device://status`;
        await g.client.subscribeResource({ uri }, { timeout: REQ_MS });
        const from = g.mark();
        await call(g, `${label}.self.sim.touch`);
        const ev = await g.until((e) => e.kind === 'updated', EVENT_MS, from);
        await g.client.unsubscribeResource({ uri }, { timeout: REQ_MS });
        return [ev?.params?.uri === uri, json(ev?.params)];
    });
    await step('/mcp tasks: the task id is <label>.job-<n>, tasks/get and tasks/result by it',
        async () => {
            const c = await g.client.request(
                {
                    method: 'tools/call',
                    params: { name: `${label}.self.sim.job`, arguments: { ms: 200 } },
                },
                CreateTaskResultSchema,
                { task: { ttl: 60000 }, timeout: REQ_MS }
            );
            const id = c.task.taskId;
            const tasks = g.client.experimental.tasks;
            const t = await tasks.getTask(id, { timeout: REQ_MS });
            const r = await tasks.getTaskResult(id, CallToolResultSchema, { timeout: REQ_MS });
            return [
                id.startsWith(`${label}.job-`) &&
                    t.taskId === id &&
                    textOf(r) === 'job done after 200 ms',
                `${id}: ${json(t)} ${json(r)}`,
            ];
        });
    const made = await g.client.request(
        { method: 'tools/call', params: { name: `${label}.self.sim.job`, arguments: { ms: 30000 } } },
        CreateTaskResultSchema,
        { task: { ttl: 60000 }, timeout: REQ_MS }
    );
    await strangerChecks(opened, `${o.base}/mcp`, made.task.taskId, '/mcp ');
    await step('/mcp: the session that made it still cancels its task', async () => {
        const x = await g.client.experimental.tasks.cancelTask(made.task.taskId, { timeout: REQ_MS });
        return [x.status === 'cancelled', json(x)];
    });
    await step('/mcp tasks/list is refused (only on the device endpoint)', async () => {
        try {
            return [false, json(await g.client.experimental.tasks.listTasks(undefined, { timeout: REQ_MS }))];
        } catch (err) {
            return [err instanceof McpError, errText(err)];
        }
    });
}

// ---- part changes ----

const LISTS = {
    tools: ['listTools', 'tools', (x) => x.name],
    resources: ['listResources', 'resources', (x) => x.uri],
    prompts: ['listPrompts', 'prompts', (x) => x.name],
};

async function names(session, kind) {
    const [method, key, pick] = LISTS[kind];
    return (await listAll(session.client, method, key)).map(pick);
}

async function partChanges(o) {
    const g = await open(`${o.base}/mcp`, o.token, { name: 'surface-changes' });
    const sessions = [g];
    try {
        note((await g.streamOpen()) ? 'stream_open' : 'no stream');
        const mac = macOf(o.device);
        const deadline = Date.now() + o.waitMs;
        const left = () => Math.max(0, deadline - Date.now());
        const mine = (t) => t.startsWith(`${mac}-`);
        const changed = (kind) => (e) => e.kind === 'changed' && e.list === kind;
        // The device comes online: its tools appear on /mcp.
        let tools = [];
        let from = 0;
        while (!tools.some(mine)) {
            const ev = await g.until(changed('tools'), left(), from);
            if (!ev) {
                break;
            }
            from = ev.at + 1;
            tools = await names(g, 'tools');
        }
        const first = tools.find(mine);
        if (!check('the device coming online is announced on /mcp (tools list_changed)', first)) {
            return;
        }
        const label = first.slice(0, first.indexOf('.'));
        // At once its own endpoint, well before the device changes its lists.
        const d = await open(`${o.base}/mcp/devices/${encodeURIComponent(o.device)}`, o.token, {
            name: 'surface-changes-device',
        });
        sessions.push(d);
        check('its endpoint holds a GET stream before the change', await d.streamOpen());
        const gFrom = g.mark();
        const before = {};
        for (const kind of Object.keys(LISTS)) {
            before[kind] = await names(d, kind);
        }
        for (const kind of Object.keys(LISTS)) {
            const ev = await d.until(changed(kind), left());
            const now = ev ? await names(d, kind) : [];
            const added = now.filter((x) => !before[kind].includes(x));
            check(`${kind} list_changed reaches the device endpoint's GET stream, one new ` +
                `${kind.replace(/s$/, '')} listed`,
                ev !== null && added.length === 1 && before[kind].every((x) => now.includes(x)),
                `event ${ev !== null}, added ${json(added)}, before ${json(before[kind])}`);
            // The same on /mcp, under the device's label.
            const want = kind === 'resources' ? `hybridgw://${label}/${added[0]}` : `${label}.${added[0]}`;
            let listed = [];
            let f = gFrom;
            let seen = false;
            for (;;) {
                const e2 = await g.until(changed(kind), left(), f);
                if (!e2) {
                    break;
                }
                f = e2.at + 1;
                listed = await names(g, kind);
                if (added.length === 1 && listed.includes(want)) {
                    seen = true;
                    break;
                }
            }
            check(`and on /mcp: ${kind} list_changed, then ${want} listed`, seen,
                listed.filter((x) => x.includes(label)).join(','));
        }
    } finally {
        for (const s of sessions) {
            await s.close();
        }
    }
}

function parseOptions(argv) {
    const { values } = parseArgs({
        args: argv,
        options: {
            base: { type: 'string' },
            token: { type: 'string' },
            'manager-key': { type: 'string' },
            part: { type: 'string', default: 'main' },
            esp: { type: 'string' },
            stock: { type: 'string' },
            device: { type: 'string' },
            'big-bytes': { type: 'string', default: '4096' },
            'big-limit': { type: 'string', default: '2048' },
            'device-request-ms': { type: 'string', default: '60000' },
            'wait-ms': { type: 'string', default: '30000' },
            'deadline-ms': { type: 'string', default: '90000' },
            help: { type: 'boolean', short: 'h', default: false },
        },
        strict: true,
    });
    if (values.help) {
        return { help: true };
    }
    const need = { main: ['esp', 'stock'], changes: ['device'] }[values.part];
    if (!need) {
        throw new Error(`--part ${values.part}: main or changes`);
    }
    for (const k of ['base', 'token', ...need]) {
        if (!values[k]) {
            throw new Error(`--${k} is required`);
        }
    }
    const number = (key) => {
        const v = Number(values[key]);
        if (!Number.isInteger(v) || v <= 0) {
            throw new Error(`--${key}: expected a whole number, got ${values[key]}`);
        }
        return v;
    };
    return {
        base: values.base.replace(/\/$/, ''),
        token: values.token,
        managerKey: values['manager-key'],
        part: values.part,
        esp: values.esp,
        stock: values.stock,
        device: values.device,
        bigBytes: number('big-bytes'),
        bigLimit: number('big-limit'),
        deviceRequestMs: number('device-request-ms'),
        waitMs: number('wait-ms'),
        deadlineMs: number('deadline-ms'),
    };
}

async function main() {
    let o;
    try {
        o = parseOptions(process.argv.slice(2));
    } catch (err) {
        process.stderr.write(`surface.mjs: ${err.message}\n`);
        usage(process.stderr);
        return 2;
    }
    if (o.help) {
        usage(process.stdout);
        return 0;
    }
    // Whatever hangs, the checks that ran are reported in time.
    setTimeout(() => {
        check(`part ${o.part} ended within --deadline-ms ${o.deadlineMs}`, false);
        console.log(`${passed} passed, ${failed} failed`);
        process.exit(1);
    }, o.deadlineMs).unref();
    try {
        await (o.part === 'main' ? partMain(o) : partChanges(o));
    } catch (err) {
        check(`part ${o.part} ran to its end`, false, errText(err));
    }
    console.log(`${passed} passed, ${failed} failed`);
    return failed === 0 && passed > 0 ? 0 : 1;
}

process.exitCode = await main();
// Open sockets (GET streams) must not keep the process alive.
process.exit();
