#!/usr/bin/env node
// An MCP client of one esp-mcp device across a backend's initialize that
// the gateway relays to the device mid-conversation (which makes esp-mcp
// forget its subscriptions, log level and its client's capabilities):
// what the client set up before must still work after. Prints "ok - ..."
// or "not ok - ..." per check; see usage().
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    CallToolResultSchema,
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    LoggingMessageNotificationSchema,
    McpError,
    ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

// Bounds of waits for what must come: they only cost time when broken.
const REQ_MS = 15000;
const EVENT_MS = 10000;
const URI = 'device://status';
const ANSWER = 'an answer from the reinit client';

function usage(out) {
    out.write(`usage: node reinit.mjs --base URL --token T --device ID [--deadline-ms N]

Opens a session on /mcp/devices/ID (an esp-mcp device of hybridgw-sim)
declaring sampling and elicitation, subscribes to ${URI}, sets logging to
info and checks that self.sim.touch brings an update and an info line.
Then prints "# ready" and waits for a line on stdin (the caller's: the
backend's initialize reached the device), and checks again: sampling
(self.sim.ask) and elicitation (self.sim.confirm) reach this session, and
self.sim.touch brings the update and the info line.

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

function errText(err) {
    if (err instanceof McpError) {
        return `error ${err.code}: ${err.message}`;
    }
    return err?.message ?? String(err);
}

async function step(what, fn) {
    try {
        const [cond, detail] = await fn();
        return check(what, cond, detail);
    } catch (err) {
        return check(what, false, `threw: ${errText(err)}`);
    }
}

const json = (v) => JSON.stringify(v ?? null).slice(0, 300);

// What the session got, in order; until() waits for one, bounded.
const events = [];
let waiters = [];

function push(ev) {
    events.push(ev);
    waiters = waiters.filter((w) => !w());
}

function until(pred, from) {
    const find = () => events.slice(from).find(pred) ?? null;
    if (find()) {
        return Promise.resolve(find());
    }
    return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(null), EVENT_MS);
        waiters.push(() => {
            const ev = find();
            if (ev) {
                clearTimeout(timer);
                resolve(ev);
            }
            return ev !== null;
        });
    });
}

async function open(o) {
    let streamOpen;
    const opened = new Promise((resolve) => {
        streamOpen = resolve;
    });
    const watchingFetch = async (u, init) => {
        const res = await fetch(u, init);
        const type = res.headers.get('content-type') ?? '';
        if ((init?.method ?? 'GET') === 'GET' && res.ok && type.startsWith('text/event-stream')) {
            streamOpen(true);
        }
        return res;
    };
    const url = `${o.base}/mcp/devices/${encodeURIComponent(o.device)}`;
    const transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${o.token}` } },
        fetch: watchingFetch,
    });
    const client = new Client(
        { name: 'reinit', version: '1.0.0' },
        { capabilities: { sampling: {}, elicitation: {} } }
    );
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) =>
        push({ kind: 'updated', params: n.params })
    );
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) =>
        push({ kind: 'log', params: n.params })
    );
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        push({ kind: 'sampling', params: req.params });
        return {
            role: 'assistant',
            content: { type: 'text', text: ANSWER },
            model: 'reinit-test-model',
            stopReason: 'endTurn',
        };
    });
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
        push({ kind: 'elicitation', params: req.params });
        return { action: 'accept', content: { ok: true } };
    });
    await client.connect(transport, { timeout: REQ_MS });
    const stream = await Promise.race([opened, new Promise((r) => setTimeout(() => r(false), EVENT_MS))]);
    return { client, transport, stream };
}

async function call(client, name, args = {}) {
    const result = await client.callTool({ name, arguments: args }, CallToolResultSchema, {
        timeout: REQ_MS,
    });
    const text = (result.content ?? []).map((c) => c.text ?? '').join('');
    return { result, text };
}

// self.sim.touch brings resources/updated of URI and its info line.
async function touchChecks(client, when) {
    await step(`${when}: self.sim.touch brings resources/updated of ${URI}`, async () => {
        const from = events.length;
        const r = await call(client, 'self.sim.touch');
        const ev = await until((e) => e.kind === 'updated' && e.params?.uri === URI, from);
        return [ev !== null && r.result.isError !== true, `${r.text}, update ${ev !== null}`];
    });
    await step(`${when}: and its info log line`, async () => {
        const from = events.length;
        await call(client, 'self.sim.touch');
        const ev = await until(
            (e) => e.kind === 'log' && e.params?.level === 'info' && String(e.params?.data).startsWith('touched'),
            from
        );
        return [ev !== null, json(ev)];
    });
}

async function run(o) {
    const { client, transport, stream } = await open(o);
    check('the session holds a GET stream (device requests reach it)', stream);
    await client.subscribeResource({ uri: URI }, { timeout: REQ_MS });
    await client.setLoggingLevel('info', { timeout: REQ_MS });
    await touchChecks(client, 'before');
    console.log('# ready');
    const lines = createInterface({ input: process.stdin });
    const go = await new Promise((resolve) => {
        lines.once('line', () => resolve(true));
        lines.once('close', () => resolve(false));
    });
    lines.close();
    check('the caller said the backend initialize reached the device', go);
    await step('after: elicitation (self.sim.confirm) reaches this session and is answered', async () => {
        const from = events.length;
        const r = await call(client, 'self.sim.confirm', { message: 'still there?' });
        const asked = events.slice(from).some((e) => e.kind === 'elicitation');
        return [asked && r.result.isError !== true && r.text.includes('accept'), `asked ${asked}: ${r.text}`];
    });
    await step('after: sampling (self.sim.ask) reaches this session and is answered', async () => {
        const from = events.length;
        const r = await call(client, 'self.sim.ask', { question: 'still there?' });
        const asked = events.slice(from).some((e) => e.kind === 'sampling');
        return [asked && r.result.isError !== true && r.text === ANSWER, `asked ${asked}: ${r.text}`];
    });
    await touchChecks(client, 'after');
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
}

function parseOptions(argv) {
    const { values } = parseArgs({
        args: argv,
        options: {
            base: { type: 'string' },
            token: { type: 'string' },
            device: { type: 'string' },
            'deadline-ms': { type: 'string', default: '90000' },
            help: { type: 'boolean', short: 'h', default: false },
        },
        strict: true,
    });
    if (values.help) {
        return { help: true };
    }
    for (const k of ['base', 'token', 'device']) {
        if (!values[k]) {
            throw new Error(`--${k} is required`);
        }
    }
    const deadlineMs = Number(values['deadline-ms']);
    if (!Number.isInteger(deadlineMs) || deadlineMs <= 0) {
        throw new Error(`--deadline-ms: expected a whole number, got ${values['deadline-ms']}`);
    }
    return { base: values.base.replace(/\/$/, ''), token: values.token, device: values.device, deadlineMs };
}

async function main() {
    let o;
    try {
        o = parseOptions(process.argv.slice(2));
    } catch (err) {
        process.stderr.write(`reinit.mjs: ${err.message}\n`);
        usage(process.stderr);
        return 2;
    }
    if (o.help) {
        usage(process.stdout);
        return 0;
    }
    setTimeout(() => {
        check(`ended within --deadline-ms ${o.deadlineMs}`, false);
        console.log(`${passed} passed, ${failed} failed`);
        process.exit(1);
    }, o.deadlineMs).unref();
    try {
        await run(o);
    } catch (err) {
        check('ran to its end', false, errText(err));
    }
    console.log(`${passed} passed, ${failed} failed`);
    return failed === 0 && passed > 0 ? 0 : 1;
}

process.exitCode = await main();
process.exit();
