// Claude Code, headless (`claude -p`), against hearth through a logging proxy that keeps
// the exact requests Claude Code sends.
//
// Random weights never end a turn on their own, and Claude Code treats a reply cut off at
// max_tokens as an error. So the proxy adds stop_sequences to each /v1/messages request
// on its way to hearth: the reply then ends with stop_reason "stop_sequence" within a few
// tokens, which Claude Code accepts as a finished turn. Everything else (its system
// prompt, tools, mid-conversation system turns, thinking settings, streaming, the
// x-api-key header) reaches hearth unchanged, and the captured bodies are the originals.
//
// HEARTH_E2E_UPDATE_FIXTURES=1 rewrites fixtures/claude-code-request.json (sanitized) from
// the first captured request. Captured requests always go to $HEARTH_E2E_OUT/claude-code/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BASE_URL, API_KEY, OUT_DIR, MODEL, post, assertStillServes } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const claudeBin = path.join(here, 'node_modules', '.bin', 'claude');
const fixturePath = path.join(here, 'fixtures', 'claude-code-request.json');
const STOP_SEQUENCES = [' ', '\n', 'e', 'a', 'o', 'i', 'n', 't', 's', '.'];
const CLAUDE_TIMEOUT_MS = 240_000;

// Why Claude Code cannot run here, or null when it can. That it cannot is a failure,
// never a skip: node's runner counts a skipped test as passed.
function whyNoClaude() {
  if (!fs.existsSync(claudeBin)) return `${claudeBin} is missing (npm ci did not install it)`;
  const r = spawnSync(claudeBin, ['--version'], { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH } });
  if (r.error) return `claude --version failed: ${r.error.message}`;
  if (r.status !== 0) return `claude --version exited ${r.status}: ${r.stderr}`;
  return null;
}

// A proxy in front of hearth that records every request and adds STOP_SEQUENCES to
// message requests.
function startProxy(captured) {
  const target = new URL(BASE_URL);
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const original = Buffer.concat(chunks).toString('utf8');
      const record = { method: req.method, url: req.url, headers: req.headers, body: original, status: 0 };
      captured.push(record);
      let forward = original;
      if (req.method === 'POST' && new URL(req.url, BASE_URL).pathname === '/v1/messages') {
        const body = JSON.parse(original);
        body.stop_sequences = [...(body.stop_sequences ?? []), ...STOP_SEQUENCES];
        forward = JSON.stringify(body);
      }
      const headers = { ...req.headers, host: target.host, 'content-length': Buffer.byteLength(forward) };
      const upstream = http.request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers },
        (up) => {
          record.status = up.statusCode;
          res.writeHead(up.statusCode, up.headers);
          up.pipe(res);
        },
      );
      upstream.on('error', (err) => {
        record.status = 502;
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(String(err));
      });
      upstream.end(forward);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function runClaude(args, { cwd, env }) {
  return new Promise((resolve) => {
    const child = spawn(claudeBin, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), CLAUDE_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

// The request without what identifies this machine, this run or this user.
function sanitize(bodyText, { home, work }) {
  const slug = (p) => p.replace(/[^a-zA-Z0-9]/g, '-');
  let text = bodyText
    .split(work).join('/home/user/project')
    .split(slug(work)).join(slug('/home/user/project'))
    .split(home).join('/home/user')
    .replace(/OS Version: [^\\"]*/g, 'OS Version: Linux 6.1.0');
  const body = JSON.parse(text);
  if (body.metadata?.user_id) {
    body.metadata.user_id = JSON.stringify({
      device_id: '0'.repeat(64),
      account_uuid: '',
      session_id: '00000000-0000-0000-0000-000000000000',
    });
  }
  return body;
}

let proxy;
const captured = [];
let sandbox;

before(async () => {
  proxy = await startProxy(captured);
  sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cc-'));
  fs.mkdirSync(path.join(sandbox, 'home'));
  fs.mkdirSync(path.join(sandbox, 'work'));
});

after(() => {
  proxy?.close();
  if (sandbox) fs.rmSync(sandbox, { recursive: true, force: true });
});

test('Claude Code completes a headless turn against hearth', { timeout: CLAUDE_TIMEOUT_MS + 30_000 }, async () => {
  const why = whyNoClaude();
  assert.equal(why, null, `Claude Code cannot run: ${why}`);
  const home = path.join(sandbox, 'home');
  const work = path.join(sandbox, 'work');
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${proxy.address().port}`,
    ANTHROPIC_API_KEY: API_KEY,
    // Nothing but the server: no update checks, telemetry, error reports or other calls.
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    CLAUDE_CODE_MAX_OUTPUT_TOKENS: '64',
  };
  // The random model's reply can come out empty: a stop sequence may match its very first
  // piece, and Claude Code reports an empty turn as an error. Another prompt gives another
  // reply; a working server passes with one of three. Every request must still succeed.
  let r;
  const runs = [];
  for (const prompt of ['say hi', 'say hello', 'greet me']) {
    const args = ['-p', prompt, '--max-turns', '1', '--model', MODEL, '--output-format', 'json'];
    r = await runClaude(args, { cwd: work, env });
    runs.push(`prompt ${JSON.stringify(prompt)}: exit ${r.code} ${r.signal ?? ''}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n`);
    if (r.code === 0 && JSON.parse(r.stdout).is_error === false) break;
  }

  const outDir = path.join(OUT_DIR, 'claude-code');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'run.txt'), runs.join('\n'));
  captured.forEach((c, i) => fs.writeFileSync(path.join(outDir, `request-${i}.json`), JSON.stringify(c, null, 1)));

  assert.equal(r.code, 0, `claude exited ${r.code} ${r.signal ?? ''}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  const result = JSON.parse(r.stdout);
  assert.equal(result.type, 'result');
  assert.equal(result.is_error, false, r.stdout);

  const messages = captured.filter((c) => c.url.startsWith('/v1/messages'));
  assert.ok(messages.length >= 1, 'Claude Code sent no /v1/messages request');
  for (const c of captured) assert.equal(c.status, 200, `${c.method} ${c.url} -> ${c.status}`);
  for (const c of captured) assert.equal(c.headers['x-api-key'], API_KEY);

  const first = JSON.parse(messages[0].body);
  assert.equal(first.model, MODEL);
  assert.equal(first.stream, true);
  assert.ok(Array.isArray(first.system) && first.system.length > 0, 'system blocks');
  assert.ok(Array.isArray(first.tools) && first.tools.length > 0, 'tools');
  assert.ok(first.tools.every((t) => t.input_schema || t.type), 'every client tool has an input_schema');

  if (process.env.HEARTH_E2E_UPDATE_FIXTURES === '1') {
    const clean = sanitize(messages[0].body, { home, work });
    fs.writeFileSync(fixturePath, JSON.stringify(clean, null, 2) + '\n');
  }
  await assertStillServes();
});

// The saved request (the cache benchmark's agent workload) must stay one hearth accepts.
test('the saved Claude Code request renders', async () => {
  const body = JSON.parse(fs.readFileSync(fixturePath, 'utf8'));
  const r = await post('/v1/messages/count_tokens', body, { 'x-api-key': API_KEY, authorization: '' });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.input_tokens > 1000, r.text);
});
