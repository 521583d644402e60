#!/usr/bin/env node
// An MCP client built on the official SDK (Client + Streamable HTTP
// transport), as any AI application would use hybridgw's MCP server:
// connect, list every page of tools, call tools, wait for list_changed.
// Progress goes to stderr as JSON lines; the result is one JSON line on
// stdout. See usage() for the options and exit codes.
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const EXIT = { ok: 0, connect: 1, usage: 2, call: 3, listChanged: 4 };

function usage(out) {
    out.write(`usage: node client.mjs --url URL [options]

Connects to an MCP server over Streamable HTTP with the official SDK,
lists its tools (every page), then runs the calls and waits asked for.

  --url URL                the MCP endpoint, e.g. http://127.0.0.1:8007/mcp
  --token T                bearer token (Authorization: Bearer T)
  --call NAME[:JSON]       call a tool with these arguments (a JSON object);
                           repeatable, run in order after the list
  --no-list                skip tools/list
  --wait-list-changed N    after the calls, wait for N
                           notifications/tools/list_changed (the tools are
                           listed again after each)
  --wait-ms MS             bound on that wait, default 10000
  --request-timeout MS     per request, default 30000
  --name NAME              clientInfo.name, default hybridgw-test-client
  -h, --help               this text

Progress on stderr, one JSON object a line: {"event":"connected"},
{"event":"listed"}, {"event":"stream_open"} once the GET stream is
answered, {"event":"call"}, {"event":"list_changed","n":N,"tools":[...]}.
Result on stdout: {"ok","url","sessionId","protocolVersion","server",
"tools":[names],"pages","calls":[{"name","ok","text","result"|"error",
"ms"}],"listChanged":{"seen","tools"},"error"}.

Exit status: 0 all went well; 1 connect or tools/list failed; 2 usage;
3 a tool call failed (JSON-RPC error or isError); 4 fewer list_changed
notifications than asked within the bound.
`);
}

function progress(event, extra = {}) {
    process.stderr.write(JSON.stringify({ event, ...extra }) + '\n');
}

function parseCall(spec) {
    const colon = spec.indexOf(':');
    const name = colon < 0 ? spec : spec.slice(0, colon);
    const args = colon < 0 ? {} : JSON.parse(spec.slice(colon + 1));
    if (name === '' || args === null || typeof args !== 'object' || Array.isArray(args)) {
        throw new Error(`--call ${spec}: expected NAME[:JSON-OBJECT]`);
    }
    return { name, args };
}

function parseOptions(argv) {
    const { values } = parseArgs({
        args: argv,
        options: {
            url: { type: 'string' },
            token: { type: 'string' },
            call: { type: 'string', multiple: true, default: [] },
            'no-list': { type: 'boolean', default: false },
            'wait-list-changed': { type: 'string', default: '0' },
            'wait-ms': { type: 'string', default: '10000' },
            'request-timeout': { type: 'string', default: '30000' },
            name: { type: 'string', default: 'hybridgw-test-client' },
            help: { type: 'boolean', short: 'h', default: false },
        },
        strict: true,
    });
    if (values.help) {
        return { help: true };
    }
    const number = (key) => {
        const v = Number(values[key]);
        if (!Number.isInteger(v) || v < 0) {
            throw new Error(`--${key}: expected a whole number, got ${values[key]}`);
        }
        return v;
    };
    if (!values.url) {
        throw new Error('--url is required');
    }
    return {
        url: new URL(values.url),
        token: values.token,
        calls: values.call.map(parseCall),
        list: !values['no-list'],
        waitListChanged: number('wait-list-changed'),
        waitMs: number('wait-ms'),
        requestTimeout: number('request-timeout'),
        name: values.name,
    };
}

// Every page, following nextCursor; a cursor seen twice would loop.
async function listAll(client, timeout) {
    const names = [];
    const seen = new Set();
    let cursor;
    let pages = 0;
    do {
        const page = await client.listTools(cursor ? { cursor } : {}, { timeout });
        pages++;
        for (const t of page.tools) {
            names.push(t.name);
        }
        cursor = page.nextCursor;
        if (cursor !== undefined && seen.has(cursor)) {
            throw new Error(`tools/list cursor ${cursor} repeats`);
        }
        seen.add(cursor);
    } while (cursor);
    return { names, pages };
}

function errorJson(err) {
    if (err instanceof McpError) {
        return { code: err.code, message: err.message, data: err.data };
    }
    return { message: err?.message ?? String(err) };
}

async function runCall(client, call, timeout) {
    const t0 = performance.now();
    const out = { name: call.name, arguments: call.args };
    try {
        const result = await client.callTool({ name: call.name, arguments: call.args }, undefined, {
            timeout,
        });
        out.result = result;
        out.text = (result.content ?? [])
            .filter((c) => c.type === 'text')
            .map((c) => c.text)
            .join('');
        out.ok = result.isError !== true;
    } catch (err) {
        out.ok = false;
        out.error = errorJson(err);
    }
    out.ms = Math.round(performance.now() - t0);
    progress('call', { name: call.name, ok: out.ok, ms: out.ms, error: out.error });
    return out;
}

// Resolves once `count` notifications arrived, or false after `ms`.
function waitFor(state, count, ms) {
    if (state.seen >= count) {
        return Promise.resolve(true);
    }
    return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        state.waiters.push(() => {
            if (state.seen >= count) {
                clearTimeout(timer);
                resolve(true);
                return true;
            }
            return false;
        });
    });
}

async function main() {
    let opts;
    try {
        opts = parseOptions(process.argv.slice(2));
    } catch (err) {
        process.stderr.write(`client.mjs: ${err.message}\n`);
        usage(process.stderr);
        return EXIT.usage;
    }
    if (opts.help) {
        usage(process.stdout);
        return EXIT.ok;
    }
    const out = { ok: false, url: opts.url.href, tools: [], pages: 0, calls: [] };
    // Tells the test when the GET stream (list_changed) is really open.
    const watchingFetch = async (url, init) => {
        const res = await fetch(url, init);
        if ((init?.method ?? 'GET') === 'GET' && res.ok &&
            (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
            out.streamOpen = true;
            progress('stream_open', { status: res.status });
        }
        return res;
    };
    const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
    const transport = new StreamableHTTPClientTransport(opts.url, {
        requestInit: { headers },
        fetch: watchingFetch,
        reconnectionOptions: {
            maxReconnectionDelay: 1000,
            initialReconnectionDelay: 200,
            reconnectionDelayGrowFactor: 1.5,
            maxRetries: 2,
        },
    });
    const client = new Client({ name: opts.name, version: '1.0.0' }, { capabilities: {} });
    const changed = { seen: 0, waiters: [], tools: [] };
    // Counted once the tools are listed again, so that a waiter sees them.
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
        const entry = {};
        if (opts.waitListChanged > 0) {
            try {
                entry.tools = (await listAll(client, opts.requestTimeout)).names;
            } catch (err) {
                entry.error = errorJson(err);
            }
        }
        entry.n = ++changed.seen;
        changed.tools.push(entry.tools ?? null);
        progress('list_changed', entry);
        changed.waiters = changed.waiters.filter((w) => !w());
    });
    let status = EXIT.ok;
    try {
        await client.connect(transport, { timeout: opts.requestTimeout });
        out.sessionId = transport.sessionId ?? null;
        out.protocolVersion = transport.protocolVersion ?? null;
        out.server = client.getServerVersion() ?? null;
        progress('connected', { sessionId: out.sessionId, protocolVersion: out.protocolVersion });
        if (opts.list) {
            const { names, pages } = await listAll(client, opts.requestTimeout);
            out.tools = names;
            out.pages = pages;
            progress('listed', { count: names.length, pages });
        }
    } catch (err) {
        out.error = errorJson(err);
        process.stdout.write(JSON.stringify(out) + '\n');
        await client.close().catch(() => {});
        return EXIT.connect;
    }
    for (const call of opts.calls) {
        const r = await runCall(client, call, opts.requestTimeout);
        out.calls.push(r);
        if (!r.ok) {
            status = EXIT.call;
        }
    }
    if (opts.waitListChanged > 0) {
        const got = await waitFor(changed, opts.waitListChanged, opts.waitMs);
        if (!got && status === EXIT.ok) {
            status = EXIT.listChanged;
        }
    }
    out.listChanged = { seen: changed.seen, tools: changed.tools };
    out.ok = status === EXIT.ok;
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
    process.stdout.write(JSON.stringify(out) + '\n');
    return status;
}

process.exitCode = await main();
// Open sockets (the GET stream) must not keep the process alive.
process.exit();
