#!/usr/bin/env node
// An MCP server built with the official SDK's server classes (McpServer and
// StreamableHTTPServerTransport, stateful sessions) on 127.0.0.1: the
// backend that devices reach through hybridgw's mcp_servers. Besides /mcp
// it answers GET /stats (what it saw, as JSON), POST /forget (it drops
// every session, so the next request on one gets 404) and POST /reset-max
// (the most /raw/ requests open at once starts again from those open now).
// /raw/<mode> is no SDK server but a broken one: it answers initialize
// (well, or not, as <mode> says), then every request as <mode> says (see
// onRaw).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

function usage(out) {
    out.write(`usage: node outbound_server.mjs [--port N] [--token T] [--json]

  --port N     TCP port on 127.0.0.1 (0: any; the line "listening PORT" says)
  --token T    bearer token every /mcp request must carry (none: no check)
  --json       answer POSTs with application/json instead of event streams
  -h, --help   this text

Tools: echo {text}, count {steps} (progress notifications on the response
stream when the request has a progressToken), slow {ms}, big {bytes},
auth {} (the Authorization header it got).
`);
}

let opts;
try {
    opts = parseArgs({
        options: {
            port: { type: 'string', default: '0' },
            token: { type: 'string', default: '' },
            json: { type: 'boolean', default: false },
            help: { type: 'boolean', short: 'h', default: false },
        },
    }).values;
} catch (e) {
    process.stderr.write(`${e.message}\n`);
    usage(process.stderr);
    process.exit(2);
}
if (opts.help) {
    usage(process.stdout);
    process.exit(0);
}

const stats = {
    initializes: 0,
    deletes: 0,
    unauthorized: 0,
    unknown_session: 0,
    calls: 0,
    cancelled: 0,
    protocol_versions: [],
    last_auth: '',
    raw_open: 0,     // /raw/ requests open now
    raw_max_open: 0, // the most of them open at once
    raw_held: 0,     // notifications of /raw/hang never answered
    raw_requests: {}, // mode -> requests after initialize
    injected: 0,     // requests with an X-Injected header
};
const sessions = new Map(); // session id -> transport

function makeServer() {
    const server = new McpServer({ name: 'outbound-test', version: '1.0.0' });
    server.registerTool('echo', {
        description: 'Echoes its text.',
        inputSchema: { text: z.string() },
    }, async ({ text }) => {
        stats.calls++;
        return { content: [{ type: 'text', text: `echo: ${text}` }] };
    });
    server.registerTool('count', {
        description: 'Counts to steps, with a progress notification per step.',
        inputSchema: { steps: z.number().int().min(1).max(50) },
    }, async ({ steps }, extra) => {
        stats.calls++;
        const token = extra._meta?.progressToken;
        for (let i = 1; i <= steps; i++) {
            if (token !== undefined) {
                await extra.sendNotification({
                    method: 'notifications/progress',
                    params: { progressToken: token, progress: i, total: steps,
                              message: `step ${i}` },
                });
            }
        }
        return { content: [{ type: 'text', text: `counted ${steps}` }] };
    });
    server.registerTool('slow', {
        description: 'Answers after ms milliseconds.',
        inputSchema: { ms: z.number().int().min(0).max(600000) },
    }, async ({ ms }, extra) => {
        stats.calls++;
        await new Promise((resolve) => {
            const t = setTimeout(resolve, ms);
            extra.signal.addEventListener('abort', () => {
                stats.cancelled++;
                clearTimeout(t);
                resolve();
            });
        });
        return { content: [{ type: 'text', text: `slept ${ms}` }] };
    });
    server.registerTool('big', {
        description: 'Answers with a text of bytes bytes.',
        inputSchema: { bytes: z.number().int().min(0).max(4194304) },
    }, async ({ bytes }) => {
        stats.calls++;
        return { content: [{ type: 'text', text: 'x'.repeat(bytes) }] };
    });
    server.registerTool('auth', {
        description: 'The Authorization header of the request.',
    }, async (extra) => {
        stats.calls++;
        return { content: [{ type: 'text',
                             text: extra.requestInfo?.headers?.authorization ?? '' }] };
    });
    return server;
}

async function readBody(req) {
    const chunks = [];
    for await (const c of req) {
        chunks.push(c);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    return text === '' ? undefined : JSON.parse(text);
}

function sendJson(res, status, obj) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(obj));
}

// The protocolVersion initialize answers with, by mode.
const rawVersions = {
    badversion: '2025-06-18\r\nX-Injected: 1',
    unknownversion: '1999-01-01',
};

// A server gone wrong after a good initialize: garbage (a body that is
// not JSON), wrongid (an answer to another id), noanswer (an event stream
// with a notification and no answer), status500, badsid (initialize gives
// a session id with a space in it), hang (requests answered {}, every
// notification but notifications/initialized never answered); or one that
// goes wrong at initialize: badversion (a protocolVersion with a header
// after a CRLF), unknownversion (a version MCP never had).
function onRaw(mode, req, res, body) {
    if (req.headers['x-injected'] !== undefined) {
        stats.injected++;
    }
    if (body?.method === 'initialize') {
        res.writeHead(200, { 'content-type': 'application/json',
                             'mcp-session-id': mode === 'badsid' ? 'bad sid' : `raw-${mode}` });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: {
            protocolVersion: rawVersions[mode] ?? '2025-11-25',
            capabilities: { tools: {} },
            serverInfo: { name: 'raw', version: '1.0.0' } } }));
        return;
    }
    stats.raw_requests[mode] = (stats.raw_requests[mode] ?? 0) + 1;
    if (mode === 'hang' && body?.id === undefined &&
        body?.method !== 'notifications/initialized') {
        stats.raw_held++;
        return; // until the gateway gives up on it
    }
    if (mode === 'hang' && body?.id !== undefined) {
        sendJson(res, 200, { jsonrpc: '2.0', id: body.id, result: {} });
        return;
    }
    if (body?.id === undefined) {
        res.writeHead(202);
        res.end();
        return;
    }
    switch (mode) {
    case 'garbage':
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('this is not json');
        break;
    case 'wrongid':
        sendJson(res, 200, { jsonrpc: '2.0', id: body.id + 1000, result: {} });
        break;
    case 'noanswer':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
                + '"params":{"level":"info","data":"before nothing"}}\n\n');
        break;
    default:
        sendJson(res, 500, { error: 'broken' });
    }
}

async function onMcp(req, res) {
    if (opts.token !== '') {
        stats.last_auth = req.headers.authorization ?? '';
        if (req.headers.authorization !== `Bearer ${opts.token}`) {
            stats.unauthorized++;
            sendJson(res, 401, { error: 'unauthorized' });
            return;
        }
    }
    const v = req.headers['mcp-protocol-version'];
    if (v !== undefined && !stats.protocol_versions.includes(v)) {
        stats.protocol_versions.push(v);
    }
    const sid = req.headers['mcp-session-id'];
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    let transport = sid !== undefined ? sessions.get(sid) : undefined;
    if (req.method === 'DELETE' && transport !== undefined) {
        stats.deletes++;
    }
    if (transport === undefined) {
        if (sid !== undefined) {
            stats.unknown_session++;
            sendJson(res, 404, { jsonrpc: '2.0', id: null,
                                 error: { code: -32001, message: 'Session not found' } });
            return;
        }
        if (req.method !== 'POST' || !isInitializeRequest(body)) {
            sendJson(res, 400, { jsonrpc: '2.0', id: null,
                                 error: { code: -32000, message: 'No session' } });
            return;
        }
        stats.initializes++;
        transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            enableJsonResponse: opts.json,
            onsessioninitialized: (id) => {
                sessions.set(id, transport);
            },
        });
        transport.onclose = () => {
            if (transport.sessionId !== undefined) {
                sessions.delete(transport.sessionId);
            }
        };
        await makeServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
}

const server = http.createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    let work;
    if (path === '/stats' && req.method === 'GET') {
        work = Promise.resolve(sendJson(res, 200, { ...stats, sessions: sessions.size }));
    } else if (path === '/reset-max' && req.method === 'POST') {
        stats.raw_max_open = stats.raw_open;
        work = Promise.resolve(sendJson(res, 200, { raw_max_open: stats.raw_max_open }));
    } else if (path === '/forget' && req.method === 'POST') {
        // Dropped without closing: the server forgets as after a restart.
        sessions.clear();
        work = Promise.resolve(sendJson(res, 200, { forgot: true }));
    } else if (path === '/mcp') {
        work = onMcp(req, res);
    } else if (path.startsWith('/raw/') && req.method === 'POST') {
        stats.raw_open++;
        stats.raw_max_open = Math.max(stats.raw_max_open, stats.raw_open);
        res.on('close', () => {
            stats.raw_open--;
        });
        work = readBody(req).then((body) => onRaw(path.slice(5), req, res, body));
    } else {
        work = Promise.resolve(sendJson(res, 404, { error: 'not found' }));
    }
    work.catch((e) => {
        process.stderr.write(`error: ${e.stack ?? e}\n`);
        if (!res.headersSent) {
            sendJson(res, 500, { error: String(e) });
        }
    });
});

server.listen(Number(opts.port), '127.0.0.1', () => {
    console.log(`listening ${server.address().port}`);
});

function stop() {
    server.close();
    server.closeAllConnections();
    process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
