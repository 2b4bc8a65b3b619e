// The OpenAI SDK's Responses client against hearth: responses.create whole and streamed,
// function tools and their outputs, a second turn read from the cache, sent both as
// input items and by previous_response_id, and stored responses retrieved and deleted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NotFoundError } from 'openai';
import {
  openai, post, get, metrics, eventually, assertOpenAIError, MODEL, OTHER_API_KEY, TEST_TIMEOUT_MS,
} from './lib.js';

const opts = { timeout: TEST_TIMEOUT_MS };
// Long enough that reuse is plain in the counts.
const INSTRUCTIONS = `You are a careful assistant. ${'Answer briefly. '.repeat(40)}`;

test('responses.create, not streamed', opts, async () => {
  const r = await openai().responses.create({
    model: MODEL,
    instructions: INSTRUCTIONS,
    input: 'Say hello.',
    max_output_tokens: 8,
    temperature: 0,
  });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.ok(r.output.length >= 1);
  for (const item of r.output) assert.ok(['reasoning', 'message', 'function_call'].includes(item.type), item.type);
  assert.equal(typeof r.output_text, 'string', 'the SDK finds the output text');
  assert.ok(r.usage.input_tokens > 0);
  assert.ok(r.usage.output_tokens <= 8);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
});

test('responses.create, streamed: events in order, the last one whole', opts, async () => {
  const stream = await openai().responses.create({
    model: MODEL,
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'Count to ten.' }] }],
    max_output_tokens: 12,
    temperature: 0,
    stream: true,
  });
  const events = [];
  for await (const ev of stream) events.push(ev);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.in_progress');
  const last = events[events.length - 1];
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  events.forEach((ev, i) => assert.equal(ev.sequence_number, i));
  const added = events.filter((e) => e.type === 'response.output_item.added');
  const done = events.filter((e) => e.type === 'response.output_item.done');
  assert.equal(added.length, done.length, 'every item that opens closes');
  assert.deepEqual(last.response.output.map((i) => i.id), done.map((e) => e.item.id));
  // The text deltas add up to the message the final response holds.
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  const message = last.response.output.find((i) => i.type === 'message');
  assert.equal(message ? message.content[0].text : '', text);
  assert.ok(last.response.usage.output_tokens > 0 && last.response.usage.output_tokens <= 12);
});

// Waits until `n` warm-aheads (one per reply) were counted since `tasksBefore` and the
// server is idle: as a user reads a reply before typing the next turn (an agent's tool
// result, sent at once, is the shadow's case and is not waited for).
async function warmAheadDone(tasksBefore, n) {
  const idle = (m) => m.hearth_slots_busy === 0 && m.hearth_requests_queued === 0;
  let m = await eventually(metrics, (x) => x.hearth_warm_ahead_tasks_total >= tasksBefore + n && idle(x),
    'the warm-ahead of the last reply');
  // The count can reach n with another reply's task while the worker still renders the
  // last reply's (seen under AddressSanitizer): wait until the engine has stayed idle, with
  // no warm-ahead task ending, for a second, as a user still reading would.
  const deadline = Date.now() + 30_000;
  let quietSince = Date.now();
  while (Date.now() - quietSince < 1000 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    const next = await metrics();
    if (!idle(next) || next.hearth_warm_ahead_tasks_total !== m.hearth_warm_ahead_tasks_total) quietSince = Date.now();
    m = next;
  }
}

test('a second turn sent as items, and one by previous_response_id, is read from the cache', opts, async () => {
  const client = openai();
  const tools = [{
    type: 'function', name: 'read_file', description: 'Read a file', strict: false,
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  }];
  const tasksBefore = (await metrics()).hearth_warm_ahead_tasks_total;
  const first = await client.responses.create({
    model: MODEL, instructions: INSTRUCTIONS, tools, input: 'Read main.c.', max_output_tokens: 6, temperature: 0,
  });
  // As an agent continues: everything again, the output items as they came, a tool's answer
  // (a call of our own when the random model made none) and the next user turn.
  const input = [{ role: 'user', content: 'Read main.c.' }, ...first.output];
  let call = first.output.find((i) => i.type === 'function_call');
  if (!call) {
    call = { type: 'function_call', call_id: 'call_e2e', name: 'read_file', arguments: '{"path":"main.c"}' };
    input.push(call);
  }
  input.push({ type: 'function_call_output', call_id: call.call_id, output: 'int main() { return 0; }' });
  const byItems = await client.responses.create({
    model: MODEL, instructions: INSTRUCTIONS, tools, input, max_output_tokens: 6, temperature: 0,
  });
  assert.ok(byItems.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 8,
    JSON.stringify(byItems.usage));
  assert.ok(byItems.usage.hearth_cache.prefilled_tokens <= byItems.usage.input_tokens - first.usage.input_tokens + 8,
    JSON.stringify(byItems.usage));

  // The user reads the reply before the next turn: what it re-renders is prepared by then.
  await warmAheadDone(tasksBefore, 2);  // first's and byItems'
  const stream = await client.responses.create({
    model: MODEL, instructions: INSTRUCTIONS, tools, previous_response_id: byItems.id,
    input: [{ role: 'user', content: 'Now summarize it.' }], max_output_tokens: 6, temperature: 0, stream: true,
  });
  let last;
  for await (const ev of stream) last = ev;
  const byId = last.response;
  assert.equal(byId.previous_response_id, byItems.id);
  // What is new: the user turn, and the turns before it as the template re-renders them
  // once a user turn follows (Qwen's drops the reasoning of a finished tool loop).
  assert.ok(byId.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(byId.usage));
  assert.ok(byId.usage.hearth_cache.prefilled_tokens <= 32, JSON.stringify([byItems.usage, byId.usage]));
});

test('an unknown previous_response_id is a 400 in OpenAI\'s shape', opts, async () => {
  const reply = await post('/v1/responses', { model: MODEL, previous_response_id: 'resp_unknown', input: 'Hi' });
  const e = assertOpenAIError(reply, 400);
  assert.equal(e.param, 'previous_response_id');
  await assert.rejects(
    openai().responses.create({ model: MODEL, input: [{ type: 'input_image_call' }] }),
    (err) => err.status === 400 && /input\[0\]\.type/.test(err.message),
  );
});

test('responses.retrieve and responses.delete, under the key that made the response only', opts, async () => {
  const client = openai();
  const other = openai({ apiKey: OTHER_API_KEY });
  const made = await client.responses.create({ model: MODEL, input: 'Say hello.', max_output_tokens: 4, temperature: 0 });
  const got = await client.responses.retrieve(made.id);
  assert.equal(got.object, 'response');
  assert.deepEqual(got.output, made.output, 'the items as created, ids included');
  assert.deepEqual(got.usage, made.usage);
  assert.equal(got.output_text, made.output_text);

  // A streamed response is stored as its last event carried it.
  const stream = await client.responses.create({
    model: MODEL, input: 'Say hello.', max_output_tokens: 4, temperature: 0, stream: true,
  });
  let last;
  for await (const ev of stream) last = ev;
  const { output_text: _, ...streamed } = await client.responses.retrieve(last.response.id);  // the SDK adds output_text
  assert.deepEqual(streamed, last.response);

  // Another key sees nothing, and cannot delete it; an unknown id reads the same.
  for (const [c, id] of [[other, made.id], [client, 'resp_unknown']]) {
    await assert.rejects(c.responses.retrieve(id), (err) => err.status === 404 && err instanceof NotFoundError);
    await assert.rejects(c.responses.delete(id), (err) => err.status === 404);
  }
  const raw = await get(`/v1/responses/${made.id}`, { authorization: `Bearer ${OTHER_API_KEY}` });
  assert.equal(assertOpenAIError(raw, 404).message, `Response with id '${made.id}' not found.`);
  assert.equal((await client.responses.retrieve(made.id)).id, made.id, 'still there for its own key');

  // Typed as void in the SDK, whose promise still resolves with the body: OpenAI's.
  for (const id of [made.id, last.response.id]) {
    assert.deepEqual(await client.responses.delete(id), { id, object: 'response', deleted: true });
  }
  for (const id of [made.id, last.response.id]) {
    await assert.rejects(client.responses.retrieve(id), (err) => err.status === 404);
    await assert.rejects(
      client.responses.create({ model: MODEL, previous_response_id: id, input: 'Again.', max_output_tokens: 2 }),
      (err) => err.status === 400 && err.param === 'previous_response_id',
    );
  }
});
