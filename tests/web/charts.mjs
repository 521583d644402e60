#!/usr/bin/env node
// Drives the operator page's "Last minutes" charts (web/, served at /ui/)
// in headless Chromium after a conversation: signs in, waits for the
// charts, and checks that each is drawn with data (lines and points in
// its SVG, a text alternative) and that the figures shown as text match
// the turns the conversation made. Prints "ok - ..." or "not ok - ..."
// per check, then "N passed, N failed"; a screenshot goes to --out.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { chromium } from 'playwright-core';

const WAIT_MS = 20000;
const USAGE = `usage: node charts.mjs --base URL --token T --turns N --out DIR [--chromium PATH]

  --base URL        the gateway's HTTP API, e.g. http://127.0.0.1:8007
  --token T         http.token
  --turns N         the turns of the conversation the gateway saw
  --out DIR         where the screenshot goes (made if missing)
  --chromium PATH   the browser (default /usr/bin/chromium)

Exit 0 when every check passed, 1 if not, 2 on bad usage.
`;

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

async function step(what, fn) {
    try {
        const r = await fn();
        check(what, r === true, typeof r === 'string' ? r : '');
    } catch (err) {
        check(what, false, err.message.split('\n')[0]);
    }
}

let args;
try {
    ({ values: args } = parseArgs({
        options: {
            base: { type: 'string' },
            token: { type: 'string' },
            turns: { type: 'string' },
            out: { type: 'string' },
            chromium: { type: 'string', default: '/usr/bin/chromium' },
        },
    }));
} catch (err) {
    process.stderr.write(`${err.message}\n${USAGE}`);
    process.exit(2);
}
if (!args.base || !args.token || !args.turns || !args.out) {
    process.stderr.write(USAGE);
    process.exit(2);
}
mkdirSync(args.out, { recursive: true });
const turns = Number(args.turns);

const browser = await chromium.launch({
    executablePath: args.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const problems = [];
try {
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('console', (msg) => {
        // A gateway without the bindings API answers its 404, which the
        // browser logs: the page says so in its Bindings panel.
        const bindings = /\/api\/bindings/.test(msg.location().url ?? '');
        if (msg.type() === 'error' && !(bindings && /status of 404/.test(msg.text()))) {
            problems.push(`console: ${msg.text()} (${msg.location().url})`);
        }
    });

    await step('the page opens with the token', async () => {
        await page.goto(`${args.base}/ui/`);
        await page.fill('#token', args.token);
        await page.click('#token-form button[type=submit]');
        await page.locator('#app').waitFor({ state: 'visible' });
        return true;
    });

    let drawn = false;
    await step('the charts are drawn', async () => {
        await page.locator('#charts svg.chart').first().waitFor();
        drawn = true;
        return true;
    });
    const charts = !drawn ? [] : [
        ['sessions', ['sessions']],
        ['packets', ['udp_rx_per_s', 'udp_tx_per_s']],
        ['gateway', ['listen_stop_ms', 'tts_start_ms', 'first_audio_ms']],
        ['first-audio', ['tts_to_audio_ms']],
    ];
    for (const [id, keys] of charts) {
        const svg = page.locator(`#charts svg.chart[data-chart="${id}"]`);
        await step(`the ${id} chart is drawn, named for screen readers`, async () => {
            await svg.waitFor();
            const title = await svg.locator('title').first().textContent();
            const desc = await svg.locator('desc').textContent();
            const labelled = await svg.getAttribute('aria-labelledby');
            return (title !== '' && /Last \d+ minutes/.test(desc) &&
                (await svg.getAttribute('role')) === 'img' && labelled !== null) ||
                `title "${title}", desc "${desc}"`;
        });
        for (const key of keys) {
            await step(`${id}: the ${key} line has points`, async () => {
                const d = await svg.locator(`path.line[data-key="${key}"]`).getAttribute('d');
                const points = await svg.locator(`g.points[data-key="${key}"] circle`).count();
                return (/^M[\d.]+,[\d.]+/.test(d ?? '') && points >= 1) ||
                    `d "${d}", ${points} points`;
            });
        }
    }

    for (const key of !drawn ? [] : ['listen_stop_ms', 'tts_start_ms', 'first_audio_ms', 'tts_to_audio_ms']) {
        await step(`${key}: its figure is shown as text, with the ${turns} turns`, async () => {
            const fig = await page.locator(`#charts .figure[data-key="${key}"]`).textContent();
            const n = await page.locator(`#charts .turns[data-key="${key}"]`).textContent();
            const ms = /^(\d+(\.\d+)?) ms$/.exec(fig);
            return (ms !== null && Number(ms[1]) >= 0 && n === ` (${turns} turns)`) ||
                `shown "${fig}"${n}`;
        });
    }
    if (drawn) await step('a point tells its time and figure on hover (its title)', async () => {
        const t = await page.locator(
            '#charts g.points[data-key="listen_stop_ms"] circle title').last().textContent();
        return /\d\d:\d\d:\d\d.*listen stop → backend \d+(\.\d+)? ms, \d+ turns/.test(t) ||
            `title "${t}"`;
    });
    await page.screenshot({ path: join(args.out, 'charts.png'), fullPage: true });
    check('no script error and no Content-Security-Policy report on the page',
        problems.length === 0, problems.slice(0, 3).join(' | '));
    await context.close();
} finally {
    await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
