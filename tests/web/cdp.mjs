// A small client of the Chrome DevTools Protocol over Node's built-in WebSocket, enough
// to drive one page of a headless Chromium: navigate, evaluate, wait for a condition,
// type, take screenshots, and collect every console error, uncaught exception and
// failed load (Log domain) the page reports. No npm package: nothing to install.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Starts `executable` headless on a free debugging port; resolves to a Browser.
export async function launch(executable, { width = 1280, height = 860 } = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'hearth-web-'));
  const args = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--no-default-browser-check', '--disable-extensions', '--disable-background-networking', '--disable-sync',
    '--disable-component-update', '--disable-default-apps', '--mute-audio', '--hide-scrollbars',
    `--window-size=${width},${height}`, `--user-data-dir=${profile}`, '--remote-debugging-port=0', 'about:blank'];
  const proc = spawn(executable, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${executable} did not start:\n${log}`)), 30_000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${executable} exited (${code}):\n${log}`)); });
  });
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = () => reject(new Error('cannot connect to ' + url)); });
  return new Browser(proc, ws, profile, { width, height });
}

class Browser {
  constructor(proc, ws, profile, viewport) {
    this.proc = proc;
    this.ws = ws;
    this.profile = profile;
    this.viewport = viewport;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = [];
    ws.onmessage = (e) => {
      const msg = JSON.parse(e.data);
      if (msg.id && this.pending.has(msg.id)) {
        const { resolve, reject, method } = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) reject(new Error(`${method}: ${msg.error.message}`));
        else resolve(msg.result);
      } else if (msg.method) {
        for (const l of this.listeners) l(msg);
      }
    };
  }

  send(method, params = {}, sessionId) {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, method }));
  }

  async newPage() {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId);
    this.listeners.push((msg) => { if (msg.sessionId === sessionId) page.onEvent(msg); });
    for (const domain of ['Page', 'Runtime', 'Log']) await page.send(`${domain}.enable`);
    await page.send('Emulation.setDeviceMetricsOverride', { ...this.viewport, deviceScaleFactor: 1, mobile: false });
    return page;
  }

  async close() {
    try { await this.send('Browser.close'); } catch { /* already gone */ }
    await new Promise((resolve) => {
      if (this.proc.exitCode !== null) return resolve();
      const timer = setTimeout(() => { this.proc.kill('SIGKILL'); resolve(); }, 5000);
      this.proc.on('exit', () => { clearTimeout(timer); resolve(); });
    });
    this.ws.close();
    rmSync(this.profile, { recursive: true, force: true });
  }
}

class Page {
  constructor(browser, sessionId) {
    this.browser = browser;
    this.sessionId = sessionId;
    this.errors = [];     // what the page reported as errors, as text
    this.waiters = [];
  }

  send(method, params) { return this.browser.send(method, params, this.sessionId); }

  onEvent({ method, params }) {
    if (method === 'Runtime.consoleAPICalled' && (params.type === 'error' || params.type === 'assert')) {
      this.errors.push('console.' + params.type + ': ' + params.args.map((a) => a.value ?? a.description).join(' '));
    } else if (method === 'Runtime.exceptionThrown') {
      const d = params.exceptionDetails;
      this.errors.push('uncaught: ' + (d.exception?.description ?? d.text));
    } else if (method === 'Log.entryAdded' && params.entry.level === 'error') {
      this.errors.push(`log (${params.entry.source}): ${params.entry.text} ${params.entry.url ?? ''}`);
    }
    this.waiters = this.waiters.filter((w) => !(w.method === method && (w.resolve(params), true)));
  }

  nextEvent(method) { return new Promise((resolve) => this.waiters.push({ method, resolve })); }

  async goto(url) {
    const loaded = this.nextEvent('Page.loadEventFired');
    const r = await this.send('Page.navigate', { url });
    if (r.errorText) throw new Error(`navigate ${url}: ${r.errorText}`);
    await loaded;
  }

  async reload() {
    const loaded = this.nextEvent('Page.loadEventFired');
    await this.send('Page.reload', {});
    await loaded;
  }

  // The value of `expression` (awaited when it is a promise); throws what it throws.
  async eval(expression) {
    const r = await this.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error(`${expression}: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value;
  }

  // Polls `expression` until it is truthy; returns that value. A guard against a hung
  // page, never a timing check.
  async waitFor(expression, what, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    let value;
    while (Date.now() < deadline) {
      value = await this.eval(expression);
      if (value) return value;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms (${expression})`);
  }

  // Focuses the element matched by `selector` and types `text` as keyboard input.
  async type(selector, text) {
    await this.eval(`document.querySelector(${JSON.stringify(selector)}).focus()`);
    await this.send('Input.insertText', { text });
  }

  // Clicks the centre of the element matched by `selector` with the mouse.
  async click(selector) {
    const box = await this.eval(`(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2 }; })()`);
    for (const type of ['mousePressed', 'mouseReleased']) {
      await this.send('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: 1 });
    }
  }

  // A PNG of the viewport, as a Buffer.
  async screenshot() {
    const { data } = await this.send('Page.captureScreenshot', { format: 'png' });
    return Buffer.from(data, 'base64');
  }
}
