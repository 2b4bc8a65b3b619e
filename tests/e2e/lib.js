// Shared set-up for the end-to-end tests: the server run.sh started, SDK clients pointed
// at it, raw HTTP helpers, and the two APIs' error shapes.
import assert from 'node:assert/strict';
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
