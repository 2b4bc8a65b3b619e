// Claude Code, headless (`claude -p`), against hearth through the logging proxy (lib.js)
// that keeps the exact requests Claude Code sends.
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
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { API_KEY, MODEL, post, assertStillServes, startProxy, proxyUrl, runAgent, whyCannotRun, saveCaptured } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const claudeBin = path.join(here, 'node_modules', '.bin', 'claude');
const fixturePath = path.join(here, 'fixtures', 'claude-code-request.json');
const CLAUDE_TIMEOUT_MS = 240_000;

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
  const why = whyCannotRun(claudeBin);
  assert.equal(why, null, `Claude Code cannot run: ${why}`);
  const home = path.join(sandbox, 'home');
  const work = path.join(sandbox, 'work');
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    ANTHROPIC_BASE_URL: proxyUrl(proxy),
    ANTHROPIC_API_KEY: API_KEY,
    // Nothing but the server: no update checks, telemetry, error reports or other calls.
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    CLAUDE_CODE_MAX_OUTPUT_TOKENS: '64',
  };
  // The random model's reply can still come out empty (a stop sequence may match its very
  // first piece: once in 30 tries), and Claude Code reports an empty turn as an error.
  // Another prompt gives another reply; a working server passes with one of six. Every
  // request must still succeed.
  let r;
  const runs = [];
  for (const prompt of ['say hi', 'say hello', 'greet me', 'hello there', 'good morning', 'hi, who are you?']) {
    const args = ['-p', prompt, '--max-turns', '1', '--model', MODEL, '--output-format', 'json'];
    r = await runAgent(claudeBin, args, { cwd: work, env, timeoutMs: CLAUDE_TIMEOUT_MS });
    runs.push(`prompt ${JSON.stringify(prompt)}: exit ${r.code} ${r.signal ?? ''}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n`);
    if (r.code === 0 && JSON.parse(r.stdout).is_error === false) break;
  }

  saveCaptured('claude-code', captured, runs);

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
