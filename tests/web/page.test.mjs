// The web page at / in a real headless Chromium against `hearth serve` on the tiny model
// (run.sh starts both): it loads with no console errors, streams replies, keeps the
// conversation across a reload, stops a reply on Stop (the server counts it cancelled),
// and its Cache view shows the second turn's reuse, the tiers and the tree.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launch } from './cdp.mjs';

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this test through tests/web/run.sh BUILD_DIR`);
  return v;
}
const BASE_URL = required('HEARTH_URL');
const API_KEY = required('HEARTH_API_KEY');
const CHROMIUM = required('HEARTH_CHROMIUM');
const OUT_DIR = required('HEARTH_WEB_OUT');
const SCREENSHOT_DIRS = [OUT_DIR, ...(process.env.HEARTH_WEB_SCREENSHOTS ? [process.env.HEARTH_WEB_SCREENSHOTS] : [])];

let browser;
let page;

before(async () => {
  browser = await launch(CHROMIUM);
  page = await browser.newPage();
});

after(async () => {
  await browser?.close();
});

async function screenshot(name) {
  const png = await page.screenshot();
  for (const dir of SCREENSHOT_DIRS) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, name), png);
  }
}

const assistantCount = `document.querySelectorAll('.msg.assistant').length`;
const idle = `document.getElementById('stop').disabled && !document.getElementById('send').disabled`;
const lastReply = `(() => { const m = [...document.querySelectorAll('.msg.assistant')].pop();
  return m && { content: m.querySelector('.content').textContent, reasoning: m.querySelector('.reasoning')?.textContent ?? '',
                role: m.querySelector('.role').textContent, usage: m.querySelector('.usage')?.textContent ?? '' }; })()`;

async function sendMessage(text) {
  const before = await page.eval(assistantCount);
  await page.type('#input', text);
  await page.click('#send');
  await page.waitFor(`${assistantCount} === ${before + 1}`, 'the reply appears');
}

test('the page loads with no console errors and says what it is', async () => {
  await page.goto(`${BASE_URL}/`);
  assert.equal(await page.eval('document.title'), 'hearth');
  assert.equal(await page.eval(`document.querySelectorAll('#tab-chat, #tab-cache').length`), 2);
  // With API keys on, the page asks for one and keeps it in the browser.
  await page.eval(`(() => { const k = document.getElementById('api-key'); k.value = ${JSON.stringify(API_KEY)};
    k.dispatchEvent(new Event('change')); })()`);
  assert.deepEqual(page.errors, []);
});

test('a message gets a streamed reply, and a second one too', async () => {
  await page.eval(`document.getElementById('max-tokens').value = '24'`);
  await page.eval(`document.getElementById('temperature').value = '0'`);
  await sendMessage('Say something about hearths.');
  await page.waitFor(idle, 'the first reply ends');
  const first = await page.eval(lastReply);
  assert.ok(first.content.length + first.reasoning.length > 0, `a reply was shown: ${JSON.stringify(first)}`);
  assert.match(first.usage, /prompt \d+ tokens, 0 from the cache/, 'a cold first turn');
  assert.doesNotMatch(first.role, /stopped/);
  // The tiny model thinks first (the template opens a think block): its reasoning sits
  // in a block that opens on a click.
  assert.ok(first.reasoning.length > 0, 'the reply has reasoning');
  assert.equal(await page.eval(`document.querySelector('.msg.assistant details').open`), false, 'reasoning starts collapsed');
  await page.click('.msg.assistant details summary');
  assert.equal(await page.eval(`document.querySelector('.msg.assistant details').open`), true, 'a click opens it');

  await sendMessage('And about fire?');
  await page.waitFor(idle, 'the second reply ends');
  const second = await page.eval(lastReply);
  assert.ok(second.content.length + second.reasoning.length > 0, `a reply was shown: ${JSON.stringify(second)}`);
  const cached = Number(second.usage.match(/(\d+) from the cache/)?.[1]);
  assert.ok(cached > 0, `the second turn resumed from the cache: ${second.usage}`);
  assert.equal(await page.eval(`document.querySelector('.msg.assistant details').open`), true,
    'the reasoning opened stays open while the page re-renders');
  await screenshot('web-chat.png');
  assert.deepEqual(page.errors, []);
});

test('the Cache view shows the second turn\'s reuse, the tiers and the tree', async () => {
  await page.click('#tab-cache');
  const rows = await page.waitFor(`(() => { const r = [...document.querySelectorAll('#requests tbody tr')];
    return r.length >= 2 && r.map((tr) => Number(tr.dataset.reused)); })()`, 'two requests in the table');
  assert.equal(rows[rows.length - 1], 0, 'the first request reused nothing');
  assert.ok(rows[0] > 0, `the newest request shows its reused tokens: ${rows}`);
  assert.equal(await page.eval(`Number(document.querySelector('#requests tbody tr .reused').textContent)`), rows[0]);
  const bars = await page.eval(`document.querySelectorAll('#timeline rect').length`);
  assert.ok(bars >= 6, `the timeline plots each request's reused, recomputed and new tokens (${bars} bars)`);
  const tiers = await page.eval(`document.getElementById('tiers').textContent`);
  assert.match(tiers, /\d+ of \d+ sequences/, 'the device tier against its room');
  assert.match(tiers, /RAM[\d.]+ \w+ of [\d.]+ \w+/, 'the RAM tier against its budget');
  const tree = await page.eval(`[...document.querySelectorAll('#tree .row')].map((r) => Number(r.dataset.depth))`);
  assert.ok(tree.length >= 3 && tree[0] === 0, `a root and the conversations' nodes: ${tree}`);
  assert.ok(await page.eval(`document.querySelectorAll('#tree .chip').length`) > 0, 'states shown with their tier');
  await screenshot('web-cache.png');
  assert.deepEqual(page.errors, []);
});

test('conversations stay in the browser across a reload', async () => {
  await page.reload();
  await page.waitFor(`${assistantCount} === 2`, 'both replies are back');
  assert.equal(await page.eval(`document.querySelectorAll('.msg.user').length`), 2);
  assert.deepEqual(page.errors, []);
});

test('Stop aborts the stream and the server counts the request cancelled', async () => {
  await page.eval(`document.getElementById('max-tokens').value = '4000'`);
  await sendMessage('Tell a very long story.');
  await page.waitFor(`(() => { const r = ${lastReply}; return r && r.content.length + r.reasoning.length > 0; })()`,
    'the reply starts streaming');
  await page.click('#stop');
  await page.waitFor(idle, 'the page is idle again');
  assert.match((await page.eval(lastReply)).role, /stopped/);
  await page.click('#tab-cache');
  await page.waitFor(`[...document.querySelectorAll('#requests tbody tr td:nth-child(9)')].some((td) => td.textContent === 'cancelled')`,
    'the stopped request is listed as cancelled');
  // The abort is expected: the page reports it as a status, never as an error.
  assert.deepEqual(page.errors, []);
});
