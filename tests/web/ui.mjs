#!/usr/bin/env node
// Drives hybridgw's operator page (web/, served at /ui/) in headless
// Chromium as an operator would: open it, type the token, find the
// device, call one of its tools through the form and read the answer the
// page shows, watch the counters move, optionally push an alert, and
// bind a device by the code it shows, then unbind it. Prints
// "ok - ..." or "not ok - ..." per check, then "N passed, N failed";
// screenshots of each step go to --out.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { chromium } from 'playwright-core';

// Bounds each wait: a loaded machine answers late, but it answers.
const WAIT_MS = 20000;

function usage(out) {
    out.write(`usage: node ui.mjs --base URL --token T --device ID --out DIR [options]

  --base URL        the gateway's HTTP API, e.g. http://127.0.0.1:8007
  --token T         http.token
  --device ID       the MQTT client id of a simulated device that is online
                    with the echo tool (hybridgw-sim device --mcp-echo-tool)
  --out DIR         where the screenshots go (made if missing)
  --tools N         the number of tools the page must list for the device
  --session ID      a device in a live session, shown with its backend
  --backend NAME    that session's backend
  --udp-device ID   a device in a live session whose UDP audio never came:
                    the sessions table shows the doctor's cause for it
  --udp-cause C     that cause (e.g. nothing)
  --alert           push an alert through the page and expect it accepted
  --bindings        the gateway has /api/bindings: drive the Bindings panel
                    (without it the panel must say the API is missing)
  --bind-code CODE  with --bindings: the code a device waiting for
                    activation shows (hybridgw-sim device --ota)
  --bind-mac MAC    that device's MAC, listed as waiting
  --bind-id ID      the client id it is bound as
  --chromium PATH   the browser (default /usr/bin/chromium)
  -h, --help        this text

Exit 0 when every check passed, 1 if not, 2 on bad usage.
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

// Runs fn; a timeout or other throw is a failed check, not the end.
async function step(what, fn) {
    try {
        const r = await fn();
        check(what, r !== false, typeof r === 'string' ? r : '');
        return r !== false;
    } catch (err) {
        check(what, false, err.message.split('\n')[0]);
        return false;
    }
}

let args;
try {
    ({ values: args } = parseArgs({
        options: {
            base: { type: 'string' },
            token: { type: 'string' },
            device: { type: 'string' },
            out: { type: 'string' },
            tools: { type: 'string' },
            session: { type: 'string' },
            backend: { type: 'string' },
            'udp-device': { type: 'string' },
            'udp-cause': { type: 'string' },
            alert: { type: 'boolean', default: false },
            bindings: { type: 'boolean', default: false },
            'bind-code': { type: 'string' },
            'bind-mac': { type: 'string' },
            'bind-id': { type: 'string' },
            chromium: { type: 'string', default: '/usr/bin/chromium' },
            help: { type: 'boolean', short: 'h', default: false },
        },
    }));
} catch (err) {
    process.stderr.write(`${err.message}\n`);
    usage(process.stderr);
    process.exit(2);
}
if (args.help) {
    usage(process.stdout);
    process.exit(0);
}
if (!args.base || !args.token || !args.device || !args.out ||
    (args.bindings && (!args['bind-code'] || !args['bind-mac'] || !args['bind-id']))) {
    usage(process.stderr);
    process.exit(2);
}
mkdirSync(args.out, { recursive: true });

const ECHO = 'hello from the operator page';
const shots = [];
async function shot(page, name) {
    const path = join(args.out, name);
    await page.screenshot({ path, fullPage: true });
    shots.push(path);
}

const browser = await chromium.launch({
    executablePath: args.chromium,
    headless: true,
    // As root (containers, CI) Chromium needs its sandbox off.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const problems = []; // script errors and CSP reports of the page
const unauthenticated = new Set(); // data calls without the bearer
let dataCalls = 0;
let deletes = 0; // DELETE /api/bindings/... requests
let signedIn = false; // the right token was typed
try {
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('console', (msg) => {
        // The wrong token's 401 is logged by the browser itself, and so
        // are the refusals the bindings steps provoke, and the 404 of a
        // gateway without the bindings API.
        const bindingsCall = /\/api\/bindings/.test(msg.location().url ?? '');
        if (msg.type() === 'error' && !/status of 401/.test(msg.text()) &&
            !(bindingsCall && /status of 40[49]/.test(msg.text()))) {
            problems.push(`console: ${msg.text()}`);
        }
    });
    page.on('request', async (req) => {
        const path = new URL(req.url()).pathname;
        if (req.method() === 'DELETE' && path.startsWith('/api/bindings/')) deletes++;
        if (/^\/(api|mcp|metrics|healthz)/.test(path)) {
            dataCalls++;
            const auth = (await req.allHeaders()).authorization ?? '';
            // Before sign-in only the wrong token's try is made.
            if (signedIn ? auth !== `Bearer ${args.token}` : !auth.startsWith('Bearer ')) {
                unauthenticated.add(`${req.method()} ${path}`);
            }
        }
    });

    const dev = args.device;
    const row = page.locator(`#devices tbody tr[data-id="${dev}"]`);

    await step('/ui redirects to /ui/ and the page asks for the token', async () => {
        await page.goto(`${args.base}/ui`);
        await page.locator('#token').waitFor({ state: 'visible' });
        return new URL(page.url()).pathname === '/ui/' || `at ${page.url()}`;
    });
    await shot(page, '01-sign-in.png');

    await step('a wrong token is refused and the page says 401', async () => {
        await page.fill('#token', 'not-the-token');
        await page.click('#token-form button[type=submit]');
        await page.locator('#login-error', { hasText: '401' }).waitFor();
        return (await page.locator('#app').isHidden()) || 'the app is shown';
    });

    await step('with the right token the page opens, the token in sessionStorage', async () => {
        await page.fill('#token', args.token);
        signedIn = true;
        await page.click('#token-form button[type=submit]');
        await page.locator('#app').waitFor({ state: 'visible' });
        const kept = await page.evaluate(() => sessionStorage.getItem('hybridgw.token'));
        return kept === args.token || 'not kept';
    });

    await step(`the device ${dev} is listed online`, async () => {
        await row.waitFor();
        const online = await row.locator('.dot').textContent();
        return online === 'online' || `shown ${online}`;
    });

    await step('the counters are shown and update live', async () => {
        const v = page.locator('[data-metric="hybridgw_http_responses_total"]');
        await v.waitFor();
        const first = await v.textContent();
        // The page's own polls are HTTP responses: the next poll counts more.
        await page.waitForFunction((before) => {
            const e = document.querySelector('[data-metric="hybridgw_http_responses_total"]');
            return e !== null && e.textContent !== before;
        }, first);
        const online = await page.locator('[data-metric="hybridgw_devices_online"]').textContent();
        return Number(online) >= 1 || `devices online ${online}`;
    });
    if (args.session !== undefined) {
        await step(`the live session of ${args.session} is shown on backend ${args.backend}`,
            async () => {
                const live = page.locator(`#sessions tbody tr[data-id="${args.session}"]`);
                await live.waitFor();
                const cells = await live.locator('td').allTextContents();
                const dev = await page.locator(
                    `#devices tbody tr[data-id="${args.session}"] td:nth-child(3)`).textContent();
                return (cells[1] === 'ACTIVE' && cells[2] === args.backend &&
                    dev === `ACTIVE · ${args.backend}`) || `shown ${cells.join(' | ')}; ${dev}`;
            });
        await step(`the backends table counts that session on ${args.backend}`, async () => {
            const cell = page.locator(`#backends tr[data-backend="${args.backend}"] td.num`);
            await cell.waitFor();
            await page.waitForFunction((name) => {
                const e = document.querySelector(`#backends tr[data-backend="${name}"] td.num`);
                return e !== null && Number(e.textContent) >= 1;
            }, args.backend);
        });
    }
    if (args.session !== undefined) {
        await step(`the UDP audio of ${args.session} is shown ok`, async () => {
            const cell = page.locator(
                `#sessions tbody tr[data-id="${args.session}"] td.udp[data-udp-state="ok"]`);
            await cell.waitFor();
            const text = await cell.textContent();
            return /^ok · \d+ packets$/.test(text) || `shown ${text}`;
        });
    }
    if (args['udp-device'] !== undefined) {
        await step(`the UDP path doctor's cause for ${args['udp-device']} is shown`,
            async () => {
                const cell = page.locator(
                    `#sessions tbody tr[data-id="${args['udp-device']}"] td.udp`);
                await cell.waitFor();
                await page.waitForFunction((id) => {
                    const e = document.querySelector(
                        `#sessions tbody tr[data-id="${id}"] td.udp`);
                    return e !== null && e.dataset.udpCause !== undefined;
                }, args['udp-device']);
                const text = await cell.textContent();
                const cause = await cell.getAttribute('data-udp-cause');
                const title = await cell.getAttribute('title');
                return (cause === args['udp-cause'] &&
                    text === `no audio · ${args['udp-cause']}` &&
                    /^told \S+:\d+; \S/.test(title ?? '')) ||
                    `shown ${text} (${cause}; ${title})`;
            });
    }
    await step('the health pill says healthy', async () => {
        await page.locator('#health', { hasText: 'healthy' }).waitFor();
    });
    await shot(page, '02-fleet.png');

    await step('selecting the device shows its detail and its tools', async () => {
        await row.click();
        await page.locator('#device-panel').waitFor({ state: 'visible' });
        await page.locator('#dev-detail dd[data-key="online"]').waitFor();
        await page.locator('#tools li[data-tool="self.sim.echo"]').waitFor();
        const n = await page.locator('#tools li').count();
        if (args.tools !== undefined && n !== Number(args.tools)) {
            return `${n} tools listed, ${args.tools} expected`;
        }
        return true;
    });

    await step('calling self.sim.echo through the form shows its answer', async () => {
        await page.selectOption('#call-tool', 'self.sim.echo');
        await page.fill('#call-fields [data-arg="text"]', ECHO);
        await page.click('#call-submit');
        const text = page.locator('#call-result pre.text');
        await text.waitFor();
        const shown = await text.textContent();
        const ok = await page.locator('#call-result.ok').count();
        return (shown === ECHO && ok === 1) || `shown "${shown}"`;
    });
    await shot(page, '03-tool-call.png');

    await step('set_volume 33 through the form, then get_device_status shows 33', async () => {
        await page.selectOption('#call-tool', 'self.audio_speaker.set_volume');
        await page.fill('#call-fields [data-arg="volume"]', '33');
        await page.click('#call-submit');
        await page.locator('#call-result', { hasText: 'set_volume: answered' }).waitFor();
        await page.selectOption('#call-tool', 'self.get_device_status');
        await page.click('#call-submit');
        await page.locator('#call-result', { hasText: 'get_device_status: answered' }).waitFor();
        const status = JSON.parse(await page.locator('#call-result pre.text').textContent());
        return status.audio_speaker?.volume === 33 || `volume ${status.audio_speaker?.volume}`;
    });

    await step('a value out of the tool\'s range comes back as the device\'s refusal', async () => {
        await page.selectOption('#call-tool', 'self.audio_speaker.set_volume');
        // The form's own min/max would stop the browser: take them off.
        await page.locator('#call-fields [data-arg="volume"]').evaluate((e) => {
            e.removeAttribute('min');
            e.removeAttribute('max');
        });
        await page.fill('#call-fields [data-arg="volume"]', '500');
        await page.click('#call-submit');
        await page.locator('#call-result.bad').waitFor();
    });

    if (args.alert) {
        await step('pushing an alert through the form is accepted', async () => {
            await page.fill('#alert-status', 'Notice');
            await page.fill('#alert-message', 'Battery low, from the page');
            await page.selectOption('#alert-emotion', 'sad');
            await page.click('#alert-submit');
            await page.locator('#alert-result .status').waitFor();
            const s = await page.locator('#alert-result .status').textContent();
            return s === 'alert pushed to the device' || `shown "${s}"`;
        });
        await shot(page, '04-alert.png');
    }

    if (args.bindings) {
        const code = args['bind-code'];
        const bindMac = args['bind-mac'];
        const bindId = args['bind-id'];
        const bound = page.locator(`#bindings tbody tr[data-id="${bindId}"]`);
        await step(`the device ${bindMac} is listed as waiting for activation, its code nowhere`,
            async () => {
                await page.locator(`#pending tbody tr[data-mac="${bindMac}"]`).waitFor();
                const text = await page.locator('#bindings-panel').textContent();
                const cells = await page.locator(
                    `#pending tbody tr[data-mac="${bindMac}"] td`).allTextContents();
                return (!text.includes(code) && /^in /.test(cells[4])) ||
                    `code shown or expiry "${cells[4]}"`;
            });
        await step('a code no device shows is refused, and the page says 404', async () => {
            const wrong = String((Number(code) + 1) % 1000000).padStart(6, '0');
            await page.fill('#bind-code', wrong);
            await page.click('#bind-submit');
            await page.locator('#bind-result.bad', { hasText: '404' }).waitFor();
        });
        await step('binding by the code the device shows lists its binding', async () => {
            await page.fill('#bind-code', code);
            await page.click('#bind-submit');
            await page.locator('#bind-result.ok', { hasText: `bound ${bindId}` }).waitFor();
            await bound.waitFor();
            const cells = await bound.locator('td').allTextContents();
            return (cells[1] === bindMac && cells[3] !== '' && cells[4] !== '') ||
                `shown ${cells.join(' | ')}`;
        });
        await step('and the device no longer waits', async () => {
            await page.locator(`#pending tbody tr[data-mac="${bindMac}"]`)
                .waitFor({ state: 'detached' });
        });
        await step('the same code again is refused (404 or 409), the page says why', async () => {
            await page.fill('#bind-code', code);
            await page.click('#bind-submit');
            await page.locator('#bind-result.bad').waitFor();
            const s = await page.locator('#bind-result .status').textContent();
            return /^(404|409): /.test(s) || `shown "${s}"`;
        });
        await shot(page, '06-bindings.png');
        await step('Unbind asks first; dismissed, the binding stays', async () => {
            page.once('dialog', (d) => d.dismiss());
            await bound.locator('button', { hasText: 'Unbind' }).click();
            // The click returns once the dialog is answered: no DELETE
            // may follow a "no".
            return (deletes === 0 && (await bound.count()) === 1) ||
                `${deletes} DELETE sent`;
        });
        await step('Unbind accepted: the binding leaves the list', async () => {
            let asked = '';
            page.once('dialog', (d) => {
                asked = d.message();
                d.accept();
            });
            await bound.locator('button', { hasText: 'Unbind' }).click();
            await page.locator('#unbind-result.ok', { hasText: `unbound ${bindId}` }).waitFor();
            await bound.waitFor({ state: 'detached' });
            return asked.includes(bindId) || `asked "${asked}"`;
        });
    } else {
        await step('the Bindings panel says this gateway has no bindings API', async () => {
            await page.locator('#bindings-off').waitFor({ state: 'visible' });
            return (await page.locator('#bindings-on').isHidden()) || 'the forms are shown';
        });
    }

    await step('a reload keeps the sign-in (sessionStorage) and the device', async () => {
        await page.reload();
        await row.waitFor();
        return (await page.locator('#login').isHidden()) || 'asked for the token again';
    });

    await step('"Forget token" signs out and clears sessionStorage', async () => {
        await page.click('#signout');
        await page.locator('#token').waitFor({ state: 'visible' });
        const kept = await page.evaluate(() => sessionStorage.getItem('hybridgw.token'));
        return kept === null || 'still kept';
    });
    await shot(page, '05-signed-out.png');

    check(`every data call carried the bearer token (${dataCalls} calls)`,
        dataCalls > 0 && unauthenticated.size === 0, [...unauthenticated].join(', '));
    check('no script error and no Content-Security-Policy report on the page',
        problems.length === 0, problems.slice(0, 3).join(' | '));
    await context.close();
} finally {
    await browser.close();
}
console.log(`# screenshots: ${shots.join(' ')}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
