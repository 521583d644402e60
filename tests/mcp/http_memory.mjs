#!/usr/bin/env node
// What unauthenticated HTTP clients can make the gateway hold: opens many
// connections at once, each announcing a big body and sending most of it
// without a bearer token, then leaves them idle and samples the gateway's
// resident memory (VmRSS of its /proc entry) until it settles; optionally
// then asks a path on a fresh connection (does the gateway still answer?).
// Prints one JSON line: the RSS before and after, the growth, how each
// connection ended (answered with a status, or closed without an answer)
// and the fresh request's status.
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
    options: {
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string' },
        pid: { type: 'string' },
        path: { type: 'string', default: '/mcp' },
        target: { type: 'string', multiple: true },
        'local-addresses': { type: 'string', default: '0' },
        probe: { type: 'string' },
        connections: { type: 'string', default: '200' },
        announce: { type: 'string', default: '262144' },
        send: { type: 'string', default: '204800' },
        'settle-ms': { type: 'string', default: '30000' },
        help: { type: 'boolean', short: 'h' },
    },
});
if (opt.help || !opt.port || !opt.pid) {
    process.stdout.write(`usage: node http_memory.mjs --port P --pid PID [options]

  --host H            the gateway's HTTP API address (127.0.0.1)
  --port P            its port
  --pid PID           the gateway's process id (its VmRSS is sampled)
  --path PATH         where to POST (/mcp)
  --target 'M PATH'   a method and path instead (repeatable: the connections
                      take them in turn)
  --local-addresses N the connections come from 127.0.0.2 .. 127.0.0.(N+1)
                      in turn (0: any address)
  --probe PATH        then GET PATH on a fresh connection (its status, or
                      "closed", in .probe)
  --connections N     connections opened at once (200)
  --announce BYTES    the Content-Length each announces (262144)
  --send BYTES        body bytes each sends before going idle (204800)
  --settle-ms MS      bound on the wait for the memory to settle (30000)
`);
    process.exit(opt.help ? 0 : 2);
}

const n = Number(opt.connections);
const announce = Number(opt.announce);
const send = Number(opt.send);
const targets = opt.target ?? [`POST ${opt.path}`];
const locals = Number(opt['local-addresses']);

function rssKiB() {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${opt.pid}/status`, 'utf8'));
    return m ? Number(m[1]) : NaN;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const before = rssKiB();
const ends = {};
let pending = n;
const sockets = [];
const head = (target) =>
    `${target} HTTP/1.1\r\nHost: ${opt.host}:${opt.port}\r\n` +
    'Content-Type: application/json\r\nAccept: application/json\r\n' +
    `Content-Length: ${announce}\r\n\r\n`;
const body = Buffer.alloc(send, 0x20);

// A connection is settled once its bytes are written (or refused), or it
// was answered or closed.
await new Promise((resolve) => {
    for (let i = 0; i < n; i++) {
        const s = net.connect({
            port: Number(opt.port),
            host: opt.host,
            ...(locals > 0 ? { localAddress: `127.0.0.${2 + (i % locals)}` } : {}),
        });
        let rx = '';
        let settled = false;
        const settle = () => {
            if (!settled) {
                settled = true;
                if (--pending === 0) resolve();
            }
        };
        s.on('data', (d) => {
            rx += d.toString('latin1');
        });
        s.on('error', () => {});
        s.on('close', () => {
            const m = /^HTTP\/1\.[01] (\d{3})/.exec(rx);
            const k = m ? m[1] : 'closed';
            ends[k] = (ends[k] ?? 0) + 1;
            settle();
        });
        s.on('connect', () => {
            s.write(head(targets[i % targets.length]));
            s.write(body, settle);
        });
        sockets.push(s);
    }
});

// Resident memory rises while the gateway reads what was sent: wait until
// two samples 300 ms apart agree within 64 KiB (bounded by --settle-ms).
let after = rssKiB();
for (let waited = 0; waited < Number(opt['settle-ms']); waited += 300) {
    await sleep(300);
    const now = rssKiB();
    if (Math.abs(now - after) <= 64) {
        after = now;
        break;
    }
    after = now;
}
// Refused connections close as the gateway gets to them, not all by the
// time its memory settles: those still open after 5 s more are held.
for (let waited = 0; waited < 5000 && sockets.some((s) => !s.destroyed); waited += 100) {
    await sleep(100);
}
ends.open = sockets.filter((s) => !s.destroyed).length;

// One request on a fresh connection, while any not refused are still
// held: its status, or how it failed.
let probe;
if (opt.probe) {
    probe = await new Promise((resolve) => {
        const s = net.connect(Number(opt.port), opt.host);
        let rx = '';
        const timer = setTimeout(() => {
            s.destroy();
            resolve('timeout');
        }, 5000);
        s.on('data', (d) => {
            rx += d.toString('latin1');
        });
        s.on('error', () => {});
        s.on('close', () => {
            clearTimeout(timer);
            const m = /^HTTP\/1\.[01] (\d{3})/.exec(rx);
            resolve(m ? Number(m[1]) : 'closed');
        });
        s.on('connect', () => {
            s.write(`GET ${opt.probe} HTTP/1.1\r\nHost: ${opt.host}:${opt.port}\r\n` +
                'Connection: close\r\n\r\n');
        });
    });
}
for (const s of sockets) s.destroy();
console.log(
    JSON.stringify({
        connections: n,
        announced: announce,
        sent: send,
        rss_before_kib: before,
        rss_after_kib: after,
        growth_kib: after - before,
        ends,
        ...(probe !== undefined ? { probe } : {}),
    }),
);
