// Shared set-up for the end-to-end tests: the server run.sh started, SDK clients pointed
// at it, raw HTTP helpers, the two APIs' error shapes, and what the agent tests share (a
// logging proxy, a sandbox, running an agent).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through tests/e2e/run.sh BUILD_DIR`);
  return v;
}

export const BASE_URL = required('HEARTH_URL');
export const API_KEY = required('HEARTH_API_KEY');
export const OTHER_API_KEY = required('HEARTH_OTHER_API_KEY');  // another client of the same server
export const CTX = Number(required('HEARTH_CTX'));
export const MAX_BODY = Number(required('HEARTH_MAX_BODY'));
export const OUT_DIR = required('HEARTH_E2E_OUT');
export const MODEL = 'tiny-qwen35';

// Guards against a hung server; never part of what a test asserts.
export const TEST_TIMEOUT_MS = 120_000;

export function openai(options = {}) {
  return new OpenAI({ baseURL: `${BASE_URL}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: TEST_TIMEOUT_MS, ...options });
}

export function anthropic(options = {}) {
  return new Anthropic({ baseURL: BASE_URL, apiKey: API_KEY, maxRetries: 0, timeout: TEST_TIMEOUT_MS, ...options });
}

// POSTs `body` (an object is sent as JSON; a string or Buffer as is) and returns
// { status, headers, text, json } (json is undefined when the reply is not JSON).
export async function post(path, body, headers = {}) {
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const res = await fetch(`${BASE_URL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, ...headers },
    body: payload,
  });
  return readReply(res);
}

export async function get(path, headers = { authorization: `Bearer ${API_KEY}` }) {
  return readReply(await fetch(`${BASE_URL}${path}`, { headers }));
}

async function readReply(res) {
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

// GET /metrics as { name: number }.
export async function metrics() {
  const r = await get('/metrics');
  assert.equal(r.status, 200, r.text);
  const out = {};
  for (const line of r.text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [name, value] = line.split(' ');
    out[name] = Number(value);
  }
  return out;
}

// Polls `read` until `done(value)`; a guard against waiting forever, not a timing check.
export async function eventually(read, done, what) {
  const deadline = Date.now() + 30_000;
  let value;
  while (Date.now() < deadline) {
    value = await read();
    if (done(value)) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`${what}: still ${JSON.stringify(value)}`);
}

// {"error": {"message", "type", "param", "code"}}
export function assertOpenAIError(reply, status, type = 'invalid_request_error') {
  assert.equal(reply.status, status, reply.text);
  assert.ok(reply.json && typeof reply.json.error === 'object', `not an OpenAI error body: ${reply.text}`);
  const e = reply.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(e.type, type);
  assert.ok('param' in e, 'error.param missing');
  assert.ok('code' in e, 'error.code missing');
  return e;
}

// {"type": "error", "error": {"type", "message"}}
export function assertAnthropicError(reply, status, type = 'invalid_request_error') {
  assert.equal(reply.status, status, reply.text);
  assert.ok(reply.json && reply.json.type === 'error', `not an Anthropic error body: ${reply.text}`);
  assert.equal(reply.json.error.type, type);
  assert.equal(typeof reply.json.error.message, 'string');
  assert.ok(reply.json.error.message.length > 0);
  return reply.json.error;
}

// One small chat request must still succeed.
export async function assertStillServes() {
  const r = await openai().chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'still there?' }],
    max_tokens: 2,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
}

// A prompt of about `n` tokens.
export function longText(n) {
  const words = [];
  for (let i = 0; i < n; i++) words.push(`w${i % 1000}`);
  return words.join(' ');
}

// Random weights never end a turn on their own, and the agents take a reply cut off at its
// token limit as an error. A logging proxy adds these stop sequences to each generation
// request on its way to hearth, so the reply ends within a few tokens as a finished turn.
// No whitespace among them: the tiny model's reply often begins with a token of whitespace
// alone, which a stop at ' ' or '\n' cut to nothing, and agents take an empty turn as an
// error (Claude Code's reply came out empty 16 times in 30 with them, once without; its
// longest reply without them was 5 tokens).
export const STOP_SEQUENCES = ['e', 'a', 'o', 'i', 'n', 't', 's', '.'];

// The request body to send on: with STOP_SEQUENCES added on the generation routes, else as
// the client sent it.
function withStops(pathname, text) {
  const field = {
    '/v1/messages': 'stop_sequences',
    '/v1/chat/completions': 'stop',
    '/v1/completions': 'stop',
    '/v1/responses': 'stop',  // llama-server's extension, which hearth takes there too
  }[pathname];
  if (!field || !text) return text;
  const body = JSON.parse(text);
  const own = body[field] == null ? [] : Array.isArray(body[field]) ? body[field] : [body[field]];
  body[field] = [...own, ...STOP_SEQUENCES];
  return JSON.stringify(body);
}

// The usage object of a reply: a JSON body's, or a stream's last one (OpenAI sends it in
// the final chunk, Anthropic in message_delta). null when the reply carried none.
export function replyUsage(text) {
  try {
    return JSON.parse(text).usage ?? null;
  } catch {
    // an SSE stream
  }
  let usage = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '[DONE]') continue;
    try {
      const event = JSON.parse(data);
      const u = event.usage ?? event.message?.usage;
      if (u) usage = { ...usage, ...u };
    } catch {
      // not JSON: not usage
    }
  }
  return usage;
}

// A proxy in front of hearth that records every request ({ method, url, headers, body,
// status, reply }: body as the client sent it, reply as hearth sent it back) into
// `captured` and adds STOP_SEQUENCES to generation requests. Resolves to the listening
// http.Server; its URL is proxyUrl(server).
export function startProxy(captured, targetUrl = BASE_URL) {
  const target = new URL(targetUrl);
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const original = Buffer.concat(chunks).toString('utf8');
      const record = { method: req.method, url: req.url, headers: req.headers, body: original, status: 0, reply: '' };
      captured.push(record);
      const forward = req.method === 'POST' ? withStops(new URL(req.url, target).pathname, original) : original;
      const headers = { ...req.headers, host: target.host, 'content-length': Buffer.byteLength(forward) };
      const upstream = http.request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers },
        (up) => {
          record.status = up.statusCode;
          res.writeHead(up.statusCode, up.headers);
          const reply = [];
          up.on('data', (c) => {
            reply.push(c);
            res.write(c);
          });
          up.on('end', () => {
            record.reply = Buffer.concat(reply).toString('utf8');
            res.end();
          });
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

export function proxyUrl(server) {
  return `http://127.0.0.1:${server.address().port}`;
}

// Runs an agent's command line; resolves to { code, signal, stdout, stderr } (killed
// after timeoutMs: a guard, never part of what a test asserts).
export function runAgent(bin, args, { cwd, env, timeoutMs }) {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

// Why `bin --version` does not run, or null when it does. That an agent cannot run is a
// failure, never a skip: node's runner counts a skipped test as passed.
export function whyCannotRun(bin, env = { PATH: process.env.PATH }) {
  if (!fs.existsSync(bin)) return `${bin} is missing (npm ci did not install it)`;
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000, env });
  if (r.error) return `${bin} --version failed: ${r.error.message}`;
  if (r.status !== 0) return `${bin} --version exited ${r.status}: ${r.stderr}`;
  return null;
}

// A sandbox for an agent: home/ (HOME and the XDG dirs point under it, so no user config
// is read) and work/ (its project directory). Returns { root, home, work, xdg }.
export function makeSandbox(prefix) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const home = path.join(root, 'home');
  const work = path.join(root, 'work');
  fs.mkdirSync(home);
  fs.mkdirSync(work);
  const xdg = {
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
  };
  return { root, home, work, xdg };
}

// Writes each captured request (and its reply) to OUT_DIR/NAME/request-I.json and the runs'
// transcripts to run.txt.
export function saveCaptured(name, captured, runs) {
  const dir = path.join(OUT_DIR, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'run.txt'), runs.join('\n'));
  captured.forEach((c, i) => fs.writeFileSync(path.join(dir, `request-${i}.json`), JSON.stringify(c, null, 1)));
  return dir;
}

// The text of a chat message (a string or text parts).
function messageText(m) {
  if (typeof m.content === 'string') return m.content;
  return (m.content ?? []).map((p) => p.text ?? '').join('');
}

// The captured chat completion that carries an agent's turn: the first that sends tools
// (side requests, such as a title for the session, send none) and whose last user message
// holds `prompt`.
export function turnRequest(captured, prompt) {
  return captured.find((c) => {
    if (c.method !== 'POST' || !c.url.startsWith('/v1/chat/completions')) return false;
    const body = JSON.parse(c.body);
    const users = body.messages.filter((m) => m.role === 'user');
    return body.tools?.length > 0 && users.length > 0 && messageText(users[users.length - 1]).includes(prompt);
  });
}

// Asserts two turns of one agent session on /v1/chat/completions: every request reached
// hearth and succeeded with the key; the first turn's request carries the agent's own
// system prompt and tools; the second continues the first and was served from the cache:
// it reused at least `minReused` of the first turn's prompt, and prefilled at most the
// rest of its own. Returns per turn { prompt_tokens, reused_tokens, prefilled_tokens }.
export function assertTwoTurnSession(captured, { firstPrompt, secondPrompt, minReused }) {
  for (const c of captured) assert.equal(c.status, 200, `${c.method} ${c.url} -> ${c.status}: ${c.reply.slice(0, 500)}`);
  for (const c of captured) assert.equal(c.headers.authorization, `Bearer ${API_KEY}`, `${c.method} ${c.url}`);
  const first = turnRequest(captured, firstPrompt);
  const second = turnRequest(captured, secondPrompt);
  assert.ok(first, `no chat completion carries the first turn (${JSON.stringify(firstPrompt)})`);
  assert.ok(second, `no chat completion carries the second turn (${JSON.stringify(secondPrompt)})`);

  const body = JSON.parse(first.body);
  assert.equal(body.stream, true);
  assert.equal(body.messages[0].role, 'system');
  assert.ok(messageText(body.messages[0]).length > 1000, 'the agent sends its system prompt');
  for (const t of body.tools) {
    assert.equal(t.type, 'function');
    assert.equal(typeof t.function.name, 'string');
    const params = t.function.parameters;
    assert.ok(params === undefined || (typeof params === 'object' && params !== null), `${t.function.name}: parameters ${JSON.stringify(params)}`);
  }
  // (The first reply is resent too unless it came out empty: the agents drop an empty turn.)
  const earlier = JSON.parse(second.body).messages.slice(0, -1);
  assert.ok(earlier.some((m) => m.role === 'user' && messageText(m).includes(firstPrompt)), 'the second turn resends the first');

  const turns = [first, second].map((c) => {
    const u = replyUsage(c.reply);
    assert.ok(u?.hearth_cache, `no usage with hearth_cache in the reply: ${c.reply.slice(-500)}`);
    assert.equal(u.prompt_tokens_details.cached_tokens, u.hearth_cache.reused_tokens);
    assert.equal(u.hearth_cache.reused_tokens + u.hearth_cache.prefilled_tokens, u.prompt_tokens);
    return { prompt_tokens: u.prompt_tokens, reused_tokens: u.hearth_cache.reused_tokens, prefilled_tokens: u.hearth_cache.prefilled_tokens };
  });
  const [t1, t2] = turns;
  assert.ok(t2.reused_tokens >= minReused * t1.prompt_tokens, `second turn reused ${t2.reused_tokens} of the first turn's ${t1.prompt_tokens} prompt tokens`);
  assert.ok(t2.prefilled_tokens <= (1 - minReused) * t2.prompt_tokens, `second turn prefilled ${t2.prefilled_tokens} of ${t2.prompt_tokens}`);
  return turns;
}
