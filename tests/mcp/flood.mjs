#!/usr/bin/env node
// Many requests a peer may send that the gateway refuses, as fast as a
// few connections carry them: POSTs of JSON-RPC requests on one MCP
// session (--mcp: initialized first, without the SDK, which would not send
// a malformed request) or plain requests (without credentials, say).
// Prints one JSON line: the count of each answer status.
import { parseArgs } from 'node:util';

const TIMEOUT_MS = 30000;

function usage(out) {
    out.write(`usage: node flood.mjs --url URL --count N [options]

  --url URL          where the requests go
  --count N          how many
  --concurrency N    at most this many at once (default 16)
  --method M         the HTTP method (default GET; POST with --mcp)
  --token T          a bearer for every request (the MCP session's too)
  --mcp BODY         initialize an MCP session on URL, then POST BODY in
                     it, each "{n}" in BODY replaced by the request's number
  --session ID       with --mcp: use this session instead (printed as
                     "session" by a run that made one)
  -h, --help         this text
`);
}

let opts;
try {
    ({ values: opts } = parseArgs({
        options: {
            url: { type: 'string' },
            count: { type: 'string' },
            concurrency: { type: 'string', default: '16' },
            method: { type: 'string' },
            token: { type: 'string' },
            mcp: { type: 'string' },
            session: { type: 'string' },
            help: { type: 'boolean', short: 'h' },
        },
    }));
} catch (err) {
    console.error(err.message);
    usage(process.stderr);
    process.exit(2);
}
if (opts.help) {
    usage(process.stdout);
    process.exit(0);
}
const count = Number(opts.count);
const concurrency = Number(opts.concurrency);
if (!opts.url || !(count > 0) || !(concurrency > 0)) {
    usage(process.stderr);
    process.exit(2);
}

const VERSION = '2025-11-25';
const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};

async function send(init) {
    try {
        const r = await fetch(opts.url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
        await r.arrayBuffer();
        return { status: String(r.status), session: r.headers.get('mcp-session-id') };
    } catch (err) {
        return { status: err.name === 'TimeoutError' ? 'timeout' : 'error' };
    }
}

let body = null;
let session = opts.session;
if (opts.mcp !== undefined) {
    const mcp = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    const init = session !== undefined ? { status: '200', session } : await send({
        method: 'POST',
        headers: { ...headers, ...mcp },
        body: JSON.stringify({
            jsonrpc: '2.0',
            id: 0,
            method: 'initialize',
            params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'flood', version: '1' } },
        }),
    });
    if (init.status !== '200' || !init.session) {
        console.log(JSON.stringify({ initialize: init.status }));
        process.exit(1);
    }
    session = init.session;
    Object.assign(headers, mcp, { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': VERSION });
    body = opts.mcp;
}

const statuses = {};
let next = 0;
async function worker() {
    while (next < count) {
        const n = next++;
        const r = await send({
            method: opts.method ?? (body !== null ? 'POST' : 'GET'),
            headers,
            body: body !== null ? body.replaceAll('{n}', String(n + 1)) : undefined,
        });
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    }
}
await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
console.log(JSON.stringify({ statuses, session }));
