// End-to-end tests of the web page in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against a real tweetsearchd started here on a free loopback port (and
// stopped at the end). Screenshots go to $ARTIFACTS_DIR.
//
//   TWEETSEARCHD=build/release/tools/tweetsearchd node --test web/tests/
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { chromium } from 'playwright-core';

const DAEMON = process.env.TWEETSEARCHD;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.ARTIFACTS_DIR || path.join(os.tmpdir(), 'tweetsearch-web-artifacts');
const SEARCH_LIMIT = 12;  // searches per hour for the demo key in this test's rules
const LIMITS = `
tiers:
  demo:
    search:
      - {name: demo_searches_per_hour, limit: ${SEARCH_LIMIT}, window: 1h, algorithm: fixed_window}
`;

let dir;
let server;
let serverLog = '';
let base;
let adminKey;
let browser;

async function waitFor(check, what, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value) return value;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}\n--- tweetsearchd log ---\n${serverLog}`);
}

async function screenshot(page, name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`screenshot: ${file}`);
}

before(async () => {
  assert.ok(DAEMON, 'set TWEETSEARCHD to the tweetsearchd binary');
  assert.ok(fs.existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: run scripts/install-deps.sh`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tweetsearch-web-'));
  fs.writeFileSync(path.join(dir, 'limits.yaml'), LIMITS);
  const portFile = path.join(dir, 'ports.json');
  server = spawn(DAEMON, [
    '--data-dir', path.join(dir, 'data'), '--http-address', '127.0.0.1', '--http-port', '0',
    '--grpc-port', '-1', '--sample', '3000', '--limits', path.join(dir, 'limits.yaml'),
    '--usage-flush-ms', '200', '--port-file', portFile,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [server.stdout, server.stderr]) {
    stream.on('data', (chunk) => { serverLog += chunk; });
  }
  const ports = await waitFor(() => fs.existsSync(portFile)
    && JSON.parse(fs.readFileSync(portFile, 'utf8')), 'tweetsearchd to start');
  base = `http://127.0.0.1:${ports.http_port}`;
  adminKey = fs.readFileSync(path.join(dir, 'data', 'admin.key'), 'utf8').trim();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await waitFor(() => server.exitCode !== null, 'tweetsearchd to stop', 30_000);
    assert.equal(server.exitCode, 0, serverLog);
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  return { page, errors };
}

async function resultIds(page) {
  return page.locator('#results li.tweet').evaluateAll((items) => items.map((li) => li.dataset.id));
}

test('search: results, highlights, paging, sort, quota, 400/401/429 messages', async () => {
  const { page, errors } = await newPage();
  await page.goto(`${base}/`);
  await page.waitForSelector('body[data-ready="true"]');
  // The demo key is filled in for a first visit.
  assert.equal(await page.inputValue('#api-key'), 'demo-key-0123456789');

  // Type a query, see results with the matched word marked.
  await page.fill('#query', 'love');
  await page.press('#query', 'Enter');
  await page.waitForSelector('#results li.tweet');
  const first = await resultIds(page);
  assert.equal(first.length, 20);
  const marks = await page.locator('#results mark').allTextContents();
  assert.ok(marks.length >= 20, `expected highlighted words, got ${marks.length}`);
  for (const m of marks) assert.equal(m.toLowerCase(), 'love');
  const author = await page.locator('#results li.tweet .author').first().textContent();
  assert.match(author, /^@\S+/);
  assert.match(await page.locator('#summary').textContent(), /20 shown of (at least )?[\d,]+ matching/);
  assert.match(await page.locator('#quota').textContent(), new RegExp(`Quota: ${SEARCH_LIMIT - 1} of ${SEARCH_LIMIT} requests left`));
  // Above the results, the query's matches per hour over the week up to the newest one: every
  // match of the sample (dated over the week before the server started).
  await page.waitForSelector('#timeline:not([hidden]) path.line');
  const matching = (await page.locator('#summary').textContent()).match(/of ([\d,]+) matching/)[1];
  assert.match(await page.locator('#timeline-caption').textContent(),
    new RegExp(`^${matching} matching tweets in the week up to the newest one shown, per hour`));
  const timelinePath = await page.locator('#timeline path.line').getAttribute('d');
  const timelineYs = [...timelinePath.matchAll(/[ML][\d.]+,([\d.]+)/g)].map((m) => Number(m[1]));
  assert.equal(timelineYs.length, 169, 'a week of hours, widened to whole hours');
  assert.ok(Math.min(...timelineYs) < Math.max(...timelineYs), 'the timeline is flat');
  await screenshot(page, 'search-results');

  // Load more: the next page, nothing repeated.
  await page.click('#more');
  await waitFor(async () => (await resultIds(page)).length === 40, 'the second page');
  const both = await resultIds(page);
  assert.deepEqual(both.slice(0, 20), first);
  assert.equal(new Set(both).size, 40, 'a page repeated a tweet');
  // Newest first: ids descend.
  const asNumbers = both.map((id) => BigInt(id));
  for (let i = 1; i < asNumbers.length; i++) assert.ok(asNumbers[i - 1] > asNumbers[i]);

  // Switch sort: most liked, likes never increase down the list.
  await page.selectOption('#sort', 'most_liked');
  await waitFor(async () => page.url().includes('sort=most_liked')
    && (await page.locator('body').getAttribute('data-busy')) === 'false', 'the re-sorted search');
  const likes = await page.locator('#results li.tweet').evaluateAll(
    (items) => items.map((li) => Number(li.dataset.likes)));
  assert.equal(likes.length, 20);
  for (let i = 1; i < likes.length; i++) assert.ok(likes[i - 1] >= likes[i], `likes ${likes}`);
  assert.notDeepEqual(await resultIds(page), first);
  await screenshot(page, 'search-most-liked');

  // Exact count: the box asks for every match to be counted, and the URL keeps it.
  await page.check('#exact-total');
  await waitFor(async () => page.url().includes('exact_total=1')
    && (await page.locator('body').getAttribute('data-busy')) === 'false', 'the exact-count search');
  assert.match(await page.locator('#summary').textContent(), /20 shown of [\d,]+ matching/);

  // A malformed query: a 400 that says what is wrong.
  await page.fill('#query', '(love');
  await page.press('#query', 'Enter');
  await page.waitForSelector('#message:not([hidden])');
  assert.match(await page.locator('#message').textContent(),
    /The request was not understood: .*unbalanced '\('/);
  assert.equal(await page.locator('#results li').count(), 0);

  // A wrong key: a 401 that says so.
  await page.fill('#api-key', 'not-a-real-key-000');
  await page.fill('#query', 'love');
  await page.press('#query', 'Enter');
  await waitFor(async () => /not valid/.test(await page.locator('#message').textContent()), 'the 401 message');
  assert.match(await page.locator('#message').textContent(), /This API key is not valid/);

  // Use up the quota: a 429 with the limit's name and when to retry.
  await page.fill('#api-key', 'demo-key-0123456789');
  for (let i = 0; i < SEARCH_LIMIT + 2; i++) {
    await page.click('#search-button');
    await waitFor(async () => (await page.locator('body').getAttribute('data-busy')) === 'false', 'a search');
    if (/Quota exceeded/.test(await page.locator('#message').textContent())) break;
  }
  const refusal = await page.locator('#message').textContent();
  assert.match(refusal, /Quota exceeded: rate limit 'demo_searches_per_hour' exceeded.*Try again in \d+/);
  assert.match(await page.locator('#quota').textContent(), /searches resume in \d+ (min|s)/);
  assert.equal(await page.locator('#more').isVisible(), false);
  await screenshot(page, 'search-429');
  assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), []);
  await page.context().close();
});

test('dashboard: status, and a usage chart with allowed and limited requests', async () => {
  const { page, errors } = await newPage();
  await page.goto(`${base}/dashboard`);
  await page.waitForSelector('body[data-ready="true"]');
  // Without a key the page says what it needs.
  await page.waitForSelector('#message:not([hidden])');
  assert.match(await page.locator('#message').textContent(), /admin scope/);

  await page.fill('#api-key', adminKey);
  await page.press('#api-key', 'Enter');
  await page.dispatchEvent('#api-key', 'change');
  await page.waitForSelector('body[data-loaded="true"]');
  assert.match(await page.locator('[data-field="status"]').textContent(), /ready/);
  // 3,000 sample tweets plus none ingested since.
  assert.equal(await page.locator('[data-field="tweets"]').textContent(), '3,000');
  assert.match(await page.locator('[data-field="ingest-rate"]').textContent(), /\/s/);

  // The demo key's last hour: the searches of the first test, some allowed, some limited.
  const demoOption = await page.locator('#usage-key option', { hasText: 'demo-key-0' }).getAttribute('value');
  await page.selectOption('#usage-key', demoOption);
  await waitFor(async () => {
    const caption = await page.locator('#chart-caption').textContent();
    const limited = await page.locator('[data-field="limited"]').textContent().catch(() => '0');
    return caption.includes('demo-key-0') && Number(limited) >= 1;
  }, 'the limited requests to reach the usage series');
  // Every admitted search (and count over time) used a unit of quota; the malformed one was
  // admitted, then rejected.
  assert.equal(await page.locator('[data-field="allowed"]').textContent(), String(SEARCH_LIMIT - 1));
  assert.equal(await page.locator('[data-field="rejected"]').textContent(), '1');
  assert.match(await page.locator('#limited-by').textContent(), /demo_searches_per_hour/);
  // The chart: one line per series, the allowed line above the baseline somewhere.
  const allowedPath = await page.locator('#chart path.line.allowed').getAttribute('d');
  const ys = [...allowedPath.matchAll(/[ML][\d.]+,([\d.]+)/g)].map((m) => Number(m[1]));
  assert.ok(ys.length === 60 || ys.length === 61, `an hour of minutes, got ${ys.length}`);
  assert.ok(Math.min(...ys) < Math.max(...ys), 'the allowed line is flat');
  assert.equal(await page.locator('#chart path.line.limited').count(), 1);
  await screenshot(page, 'dashboard-hour');

  // Other ranges draw too.
  await page.click('#ranges button[data-range="week"]');
  await waitFor(async () => /last week/.test(await page.locator('#chart-caption').textContent()), 'the week chart');
  const weekPath = await page.locator('#chart path.line.allowed').getAttribute('d');
  assert.ok([...weekPath.matchAll(/[ML]/g)].length >= 168);
  await screenshot(page, 'dashboard-week');
  // The key table lists the demo key with its counts.
  assert.match(await page.locator('#keys').textContent(), /demo-key-0/);
  assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), []);
  await page.context().close();
});

test('the page is served with a strict content security policy', async () => {
  const response = await fetch(`${base}/`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type'), /text\/html/);
  assert.match(response.headers.get('content-security-policy'), /default-src 'self'/);
  const script = await fetch(`${base}/assets/search.js`);
  assert.match(script.headers.get('content-type'), /javascript/);
  assert.equal((await fetch(`${base}/assets/nope.js`)).status, 404);
  assert.equal((await fetch(`${base}/`, { method: 'POST' })).status, 405);
});

test('live: new matches appear on top as they arrive, and deleted ones leave', async () => {
  // A key of its own: the demo key spent its searches above (this test's tier has no limits).
  const created = await fetch(`${base}/v1/admin/keys`, {
    method: 'POST',
    headers: { 'X-Api-Key': adminKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ owner: 'live-test', tier: 'free', scopes: ['search'] }),
  });
  assert.equal(created.status, 201);
  const { key } = await created.json();
  const { page, errors } = await newPage();
  await page.goto(`${base}/`);
  await page.waitForSelector('body[data-ready="true"]');
  await page.fill('#api-key', key);
  await page.dispatchEvent('#api-key', 'change');
  await page.check('#live');
  await page.fill('#query', 'wombat OR love');
  await page.press('#query', 'Enter');
  await page.waitForSelector('#results li.tweet');
  await waitFor(async () => /new matches appear/.test(await page.locator('#live-status').textContent()),
    'the stream to open');
  const before = await resultIds(page);

  const ingest = async (lines) => {
    const r = await fetch(`${base}/v1/tweets`, {
      method: 'POST',
      headers: { 'X-Api-Key': adminKey, 'Content-Type': 'application/json' },
      body: lines,
    });
    assert.equal(r.status, 200, await r.text());
  };
  await ingest('{"id":"990001","text":"a wombat goes live"}\n{"id":"990002","text":"nothing"}\n');
  await waitFor(async () => (await resultIds(page))[0] === '990001', 'the new match on top');
  await ingest('{"id":"990003","text":"love this wombat"}\n');
  await waitFor(async () => (await resultIds(page))[0] === '990003', 'the second match on top');
  const now = await resultIds(page);
  assert.deepEqual(now.slice(2), before, 'the earlier results stay below');
  assert.ok(!now.includes('990002'));
  assert.match(await page.locator('#live-status').textContent(), /Live: 2 new/);
  await screenshot(page, 'search-live');

  // A deleted match leaves the page.
  const deleted = await fetch(`${base}/v1/tweets/990001`, { method: 'DELETE', headers: { 'X-Api-Key': adminKey } });
  assert.equal(deleted.status, 200);
  await waitFor(async () => !(await resultIds(page)).includes('990001'), 'the deleted match to leave');
  // Turning it off closes the stream.
  await page.uncheck('#live');
  assert.equal(await page.locator('#live-status').isHidden(), true);
  assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), []);
  await page.context().close();
});
