// Bad requests get the right status in the shape of the API they came in on, and the
// server keeps serving after every one of them.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import {
  API_KEY,
  CTX,
  MAX_BODY,
  MODEL,
  TEST_TIMEOUT_MS,
  openai,
  anthropic,
  post,
  get,
  assertOpenAIError,
  assertAnthropicError,
  assertStillServes,
  longText,
} from './lib.js';

const opts = { timeout: TEST_TIMEOUT_MS };
const chat = (extra = {}) => ({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });
const message = (extra = {}) => ({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });

after(assertStillServes);

test('malformed JSON is a 400 in each API shape', opts, async () => {
  const e = assertOpenAIError(await post('/v1/chat/completions', '{"model": "x", "messages": ['), 400);
  assert.match(e.message, /JSON/);
  assertOpenAIError(await post('/v1/completions', '{nope'), 400);
  assertAnthropicError(await post('/v1/messages', '{"model": '), 400);
  assertAnthropicError(await post('/v1/messages/count_tokens', '[1, 2'), 400);
  // Valid JSON that is not an object.
  assertOpenAIError(await post('/v1/chat/completions', '[]'), 400);
  assertAnthropicError(await post('/v1/messages', '"text"'), 400);
  await assertStillServes();
});

test('missing messages is a 400 naming the field', opts, async () => {
  const e = assertOpenAIError(await post('/v1/chat/completions', { model: MODEL }), 400);
  assert.equal(e.param, 'messages');
  assertOpenAIError(await post('/v1/chat/completions', { model: MODEL, messages: [] }), 400);
  assertAnthropicError(await post('/v1/messages', { model: MODEL, max_tokens: 4 }), 400);
  assertOpenAIError(await post('/v1/completions', { model: MODEL }), 400);
  await assertStillServes();
});

test('fields of the wrong type are 400s', opts, async () => {
  const cases = [
    chat({ messages: 'hello' }),
    chat({ messages: [{ role: 'user', content: 42 }] }),
    chat({ messages: [{ role: 'wizard', content: 'hi' }] }),
    chat({ messages: [{ role: 'user', content: [{ type: 'hologram', text: 'hi' }] }] }),
    chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
    chat({ temperature: 'hot' }),
    chat({ temperature: 9 }),
    chat({ max_tokens: -1 }),
    chat({ max_tokens: 1.5 }),
    chat({ stream: 'yes' }),
    chat({ stop: 7 }),
    chat({ tools: [{ type: 'function', function: { name: 'f', parameters: 'not a schema' } }] }),
    chat({ tool_choice: 'sometimes' }),
    chat({ n: 3 }),
  ];
  for (const body of cases) {
    assertOpenAIError(await post('/v1/chat/completions', body), 400);
  }
  const anthropicCases = [
    message({ messages: [{ role: 'wizard', content: 'hi' }] }),
    message({ messages: [{ role: 'user', content: [{ type: 'hologram' }] }] }),
    message({ max_tokens: 'many' }),
    message({ max_tokens: undefined }),
    message({ system: 5 }),
    message({ tools: [{ name: 't', input_schema: 'nope' }] }),
    message({ thinking: { type: 'sometimes' } }),
    message({ temperature: 3 }),
  ];
  for (const body of anthropicCases) {
    assertAnthropicError(await post('/v1/messages', body), 400);
  }
  await assertStillServes();
});

test('a body that is not valid UTF-8 is a 400', opts, async () => {
  const bad = Buffer.concat([
    Buffer.from('{"model":"x","max_tokens":2,"messages":[{"role":"user","content":"'),
    Buffer.from([0xff, 0xfe, 0xc3, 0x28]),
    Buffer.from('"}]}'),
  ]);
  assertOpenAIError(await post('/v1/chat/completions', bad), 400);
  assertAnthropicError(await post('/v1/messages', bad), 400);
  await assertStillServes();
});

test('a body over --max-body is a 413', opts, async () => {
  const big = JSON.stringify(chat({ messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY + 1024) }] }));
  assertOpenAIError(await post('/v1/chat/completions', big), 413);
  assertAnthropicError(await post('/v1/messages', big), 413);
  await assertStillServes();
});

test('a prompt longer than the context is a 400 with the numbers', opts, async () => {
  const text = longText(CTX + 2000);
  const r = await post('/v1/chat/completions', chat({ messages: [{ role: 'user', content: text }] }));
  const e = assertOpenAIError(r, 400);
  assert.match(e.message, new RegExp(String(CTX)));
  const a = await post('/v1/messages', message({ messages: [{ role: 'user', content: text }] }));
  assert.match(assertAnthropicError(a, 400).message, new RegExp(String(CTX)));
  // max_tokens past what the context has left.
  const m = await post('/v1/chat/completions', chat({ max_tokens: CTX * 2 }));
  const me = assertOpenAIError(m, 400);
  assert.equal(me.param, 'max_tokens');
  assert.match(me.message, new RegExp(String(CTX * 2)));
  // Through the SDK the same error is an APIError with the status.
  await assert.rejects(openai().chat.completions.create(chat({ max_tokens: CTX * 2 })), (err) => {
    assert.ok(err instanceof OpenAI.APIError);
    assert.equal(err.status, 400);
    return true;
  });
  await assertStillServes();
});

test('unknown routes are 404s in the API shape', opts, async () => {
  assertOpenAIError(await post('/v1/nothing', chat()), 404, 'not_found_error');
  assertAnthropicError(await post('/v1/messages/nothing', message()), 404, 'not_found_error');
});

test('with --api-key: wrong or missing keys are 401, Bearer and x-api-key both work', opts, async () => {
  const noAuth = { authorization: '' };
  // Wrong key, each way of sending it, each API.
  assertOpenAIError(await post('/v1/chat/completions', chat(), { authorization: 'Bearer wrong' }), 401, 'authentication_error');
  assertOpenAIError(await post('/v1/chat/completions', chat(), { ...noAuth, 'x-api-key': 'wrong' }), 401, 'authentication_error');
  assertOpenAIError(await post('/v1/chat/completions', chat(), noAuth), 401, 'authentication_error');
  assertAnthropicError(await post('/v1/messages', message(), { ...noAuth, 'x-api-key': 'wrong' }), 401, 'authentication_error');
  assertAnthropicError(await post('/v1/messages', message(), noAuth), 401, 'authentication_error');
  // A key that is a prefix or extension of the right one is wrong too.
  assertOpenAIError(
    await post('/v1/chat/completions', chat(), { authorization: `Bearer ${API_KEY}x` }),
    401,
    'authentication_error',
  );
  assertOpenAIError(
    await post('/v1/chat/completions', chat(), { authorization: `Bearer ${API_KEY.slice(0, -1)}` }),
    401,
    'authentication_error',
  );
  assertOpenAIError(await get('/metrics', {}), 401, 'authentication_error');
  assertOpenAIError(await get('/v1/models', { authorization: 'Bearer wrong' }), 401, 'authentication_error');

  // The right key either way.
  const bearer = await post('/v1/chat/completions', chat(), { authorization: `Bearer ${API_KEY}` });
  assert.equal(bearer.status, 200, bearer.text);
  const xkey = await post('/v1/messages', message(), { ...noAuth, 'x-api-key': API_KEY });
  assert.equal(xkey.status, 200, xkey.text);
  const xkeyOpenAI = await post('/v1/chat/completions', chat(), { ...noAuth, 'x-api-key': API_KEY });
  assert.equal(xkeyOpenAI.status, 200, xkeyOpenAI.text);
  // /health needs no key.
  assert.equal((await get('/health', {})).status, 200);

  // The SDKs report 401 as their authentication errors.
  await assert.rejects(openai({ apiKey: 'wrong' }).chat.completions.create(chat()), (err) => {
    assert.equal(err.status, 401);
    assert.equal(err.constructor.name, 'AuthenticationError');
    return true;
  });
  await assert.rejects(anthropic({ apiKey: 'wrong' }).messages.create(message()), (err) => {
    assert.equal(err.status, 401);
    assert.equal(err.error?.error?.type, 'authentication_error');
    return true;
  });
});
