// Codex CLI (`codex exec`), headless, two turns of one session against hearth's
// /v1/responses, through a logging proxy that keeps the exact requests Codex sends.
//
// Codex is pointed at hearth as a custom model provider (wire_api "responses") in a
// config.toml under a fresh CODEX_HOME: no login, no update check, no analytics or
// telemetry, nothing but the server. It sends no output cap, and random weights never end
// a reply on their own, while Codex fails a turn whose response is "incomplete". So the
// proxy adds `stop` strings (llama-server's extension, which hearth takes on
// /v1/responses) to each request, and the reply ends within a few tokens as a completed
// response; hearth itself runs with -n as a backstop. Everything else (instructions,
// developer messages, tools, reasoning settings, prompt_cache_key, store: false, the
// whole conversation again on the second turn) reaches hearth as Codex sent it.
//
// This test starts its own hearth serve (HEARTH_BIN, HEARTH_MODEL from run.sh), so that -n
// applies to Codex's requests alone. Captured requests go to $HEARTH_E2E_OUT/codex/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OUT_DIR, MODEL, startProxy, runAgent, whyCannotRun } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const codexBin = path.join(here, 'node_modules', '.bin', 'codex');
const N_PREDICT = 64;
const KEY = 'hearth-e2e-codex-key';
const CODEX_TIMEOUT_MS = 180_000;

// `hearth serve` on a free port; resolves { url, child } once it listens.
function startHearth(logPath) {
  const args = ['serve', '-m', process.env.HEARTH_MODEL, '--port', '0', '--ctx-size', '32768', '--parallel', '1',
    '--api-key', KEY, '-n', String(N_PREDICT)];
  const child = spawn(process.env.HEARTH_BIN, args, { stdio: ['ignore', 'pipe', fs.openSync(logPath, 'w')] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^listening on 127\.0\.0\.1:(\d+)$/m);
      if (m) resolve({ url: `http://127.0.0.1:${m[1]}`, child });
    });
    child.on('exit', (code) => reject(new Error(`hearth serve exited ${code} before listening; see ${logPath}`)));
  });
}

// codex exec --json prints one JSON event a line.
function events(stdout) {
  return stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
}

// The response object a captured /v1/responses stream ended with.
function finalResponse(record) {
  const data = record.reply.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  const last = data[data.length - 1];
  assert.ok(last && last.response, `no final event in ${record.reply.slice(-500)}`);
  return last;
}

let hearth;
let proxy;
let sandbox;
const captured = [];

before(async () => {
  sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-codex-'));
  for (const d of ['home', 'codex-home', 'work']) fs.mkdirSync(path.join(sandbox, d));
  fs.mkdirSync(path.join(OUT_DIR, 'codex'), { recursive: true });
  hearth = await startHearth(path.join(OUT_DIR, 'codex', 'hearth.log'));
  proxy = await startProxy(captured, hearth.url);
});

after(() => {
  proxy?.close();
  hearth?.child.kill();
  if (sandbox) fs.rmSync(sandbox, { recursive: true, force: true });
});

test('Codex CLI completes two turns of one session, the second read from the cache',
  { timeout: 2 * CODEX_TIMEOUT_MS + 30_000 }, async () => {
    const why = whyCannotRun(codexBin);
    assert.equal(why, null, `Codex cannot run: ${why}`);
    const codexHome = path.join(sandbox, 'codex-home');
    const work = path.join(sandbox, 'work');
    fs.writeFileSync(path.join(codexHome, 'config.toml'), [
      `model = "${MODEL}"`,
      'model_provider = "hearth"',
      'approval_policy = "never"',
      'sandbox_mode = "read-only"',
      'check_for_update_on_startup = false',
      '',
      '[model_providers.hearth]',
      'name = "hearth"',
      `base_url = "http://127.0.0.1:${proxy.address().port}/v1"`,
      'env_key = "HEARTH_CODEX_KEY"',
      'wire_api = "responses"',
      'request_max_retries = 0',
      'stream_max_retries = 0',
      '',
      '[analytics]',
      'enabled = false',
      '',
      '[feedback]',
      'enabled = false',
      '',
      '[otel]',
      'exporter = "none"',
      '',
    ].join('\n'));
    const env = { PATH: process.env.PATH, HOME: path.join(sandbox, 'home'), CODEX_HOME: codexHome, HEARTH_CODEX_KEY: KEY };
    // --strict-config: a key this Codex does not know (a renamed telemetry switch) fails the run.
    const common = ['--skip-git-repo-check', '--strict-config', '--json'];

    const runs = [];
    const t0 = Date.now();
    const first = await runAgent(codexBin, ['exec', ...common, 'say hi'], { cwd: work, env, timeoutMs: CODEX_TIMEOUT_MS });
    runs.push(`turn 1: exit ${first.code} ${first.signal ?? ''}\n--- stdout\n${first.stdout}\n--- stderr\n${first.stderr}\n`);
    const thread = events(first.stdout).find((e) => e.type === 'thread.started')?.thread_id;
    let second = { code: null, stdout: '', stderr: '' };
    if (thread) {
      second = await runAgent(codexBin, ['exec', 'resume', ...common, thread, 'and now say bye'], { cwd: work, env, timeoutMs: CODEX_TIMEOUT_MS });
      runs.push(`turn 2: exit ${second.code} ${second.signal ?? ''}\n--- stdout\n${second.stdout}\n--- stderr\n${second.stderr}\n`);
    }
    const seconds = (Date.now() - t0) / 1000;

    const outDir = path.join(OUT_DIR, 'codex');
    fs.writeFileSync(path.join(outDir, 'run.txt'), runs.join('\n'));
    captured.forEach((c, i) => fs.writeFileSync(path.join(outDir, `request-${i}.json`), JSON.stringify(c, null, 1)));

    for (const [n, r] of [[1, first], [2, second]]) {
      assert.equal(r.code, 0, `turn ${n}: codex exited ${r.code}\n${runs.join('\n')}`);
      const types = events(r.stdout).map((e) => e.type);
      assert.ok(types.includes('turn.completed'), `turn ${n} did not complete: ${types}`);
      assert.ok(!types.includes('turn.failed'), `turn ${n} failed: ${r.stdout}`);
    }
    assert.ok(thread, 'turn 1 named no thread');

    // Codex's own requests reached hearth, one a turn, and every one succeeded.
    for (const c of captured) assert.equal(c.status, 200, `${c.method} ${c.url} -> ${c.status}: ${c.reply.slice(0, 500)}`);
    const turns = captured.filter((c) => c.method === 'POST' && c.url === '/v1/responses');
    assert.equal(turns.length, 2, captured.map((c) => `${c.method} ${c.url}`).join(', '));
    const [req1, req2] = turns.map((c) => JSON.parse(c.body));
    for (const [n, b] of [[1, req1], [2, req2]]) {
      assert.equal(b.model, MODEL);
      assert.equal(b.stream, true);
      assert.ok(Array.isArray(b.tools) && b.tools.some((t) => t.type === 'function'), `turn ${n}: Codex's tools`);
      assert.equal(b.max_output_tokens, undefined, 'Codex sends no output cap: -n is what limits it');
      assert.equal(b.stop, undefined, 'the stop strings are the proxy\'s');
    }
    assert.equal(req2.prompt_cache_key, req1.prompt_cache_key, 'one session');
    assert.ok(req2.input.length > req1.input.length, 'the second turn sends the first again');
    assert.equal(turns[0].headers.authorization, `Bearer ${KEY}`);

    // The second turn's prompt was read from the cache: all of the first turn's prompt but
    // what re-rendering its reply changes, and only the new turn prefilled.
    const [r1, r2] = turns.map((c) => finalResponse(c).response);
    for (const r of [r1, r2]) assert.equal(r.status, 'completed', JSON.stringify(r.incomplete_details));
    const u1 = r1.usage;
    const u2 = r2.usage;
    const report = {
      seconds,
      turn1: { prompt: u1.input_tokens, reused: u1.input_tokens_details.cached_tokens, prefilled: u1.hearth_cache.prefilled_tokens },
      turn2: { prompt: u2.input_tokens, reused: u2.input_tokens_details.cached_tokens, prefilled: u2.hearth_cache.prefilled_tokens },
    };
    fs.writeFileSync(path.join(outDir, 'usage.json'), JSON.stringify(report, null, 1));
    console.log(`codex: ${JSON.stringify(report)}`);
    assert.ok(u2.input_tokens > u1.input_tokens, JSON.stringify(report));
    assert.ok(u2.input_tokens_details.cached_tokens >= 0.9 * u1.input_tokens, JSON.stringify(report));
    assert.ok(u2.input_tokens_details.cached_tokens >= 0.8 * u2.input_tokens, JSON.stringify(report));
    assert.ok(u2.hearth_cache.prefilled_tokens <= u2.input_tokens - u1.input_tokens + 64, JSON.stringify(report));
  });
