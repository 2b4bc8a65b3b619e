// The OpenAI SDK against hearth: chat and text completions, streaming with usage, tools,
// aborting a stream, concurrent streams.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, metrics, eventually, assertStillServes, MODEL, TEST_TIMEOUT_MS } from './lib.js';

const opts = { timeout: TEST_TIMEOUT_MS };

test('chat completion, not streamed', opts, async () => {
  const r = await openai().chat.completions.create({
    model: MODEL,
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Say hello.' },
    ],
    max_tokens: 8,
    temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens <= 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat completion, streamed with include_usage', opts, async () => {
  const stream = await openai().chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Count to ten.' }],
    max_tokens: 12,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length >= 3, `only ${chunks.length} chunks`);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1, 'every chunk carries the same id');
  const finish = chunks.filter((c) => c.choices.length > 0 && c.choices[0].finish_reason);
  assert.equal(finish.length, 1, 'exactly one chunk carries finish_reason');
  // The usage chunk comes last, with no choices.
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage, 'usage chunk missing');
  assert.ok(last.usage.prompt_tokens > 0);
  assert.ok(last.usage.completion_tokens > 0 && last.usage.completion_tokens <= 12);
  assert.equal(typeof last.usage.prompt_tokens_details?.cached_tokens, 'number', 'cached_tokens missing');
  for (const c of chunks.slice(0, -1)) assert.ok(!c.usage, 'only the last chunk has usage');
});

test('a streamed reply carries text only in deltas, and ends once', opts, async () => {
  const stream = await openai().chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Describe the sea.' }],
    max_tokens: 16,
    stream: true,
  });
  let content = '';
  let finishes = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunk.choices.length, 1);
    const d = chunk.choices[0].delta;
    content += d.content ?? '';
    content += d.reasoning_content ?? '';
    if (chunk.choices[0].finish_reason) finishes++;
  }
  assert.equal(finishes, 1);
  assert.ok(content.length > 0, 'no text streamed');
});

test('text completion, whole and streamed', opts, async () => {
  const client = openai();
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.equal(r.choices[0].finish_reason, r.usage.completion_tokens === 6 ? 'length' : 'stop');

  const stream = await client.completions.create({
    model: MODEL,
    prompt: 'Once upon a time',
    max_tokens: 6,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage;
  let finish;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(typeof text, 'string');
  assert.ok(usage.completion_tokens > 0 && usage.completion_tokens <= 6);
  assert.equal(finish, usage.completion_tokens === 6 ? 'length' : 'stop');
});

test('tools are accepted', opts, async () => {
  const r = await openai().chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Current weather for a city',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
    ],
    tool_choice: 'auto',
    max_tokens: 16,
  });
  const c = r.choices[0];
  // Random weights rarely produce a well-formed call; whatever came back must be well-formed.
  assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason), c.finish_reason);
  for (const call of c.message.tool_calls ?? []) {
    assert.equal(call.type, 'function');
    assert.equal(typeof call.function.name, 'string');
    assert.equal(typeof call.function.arguments, 'string');
  }

  // A conversation that carries a tool call and its result renders too.
  const r2 = await openai().chat.completions.create({
    model: MODEL,
    messages: [
      { role: 'user', content: 'What is the weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 21C' },
    ],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    max_tokens: 4,
  });
  assert.equal(r2.choices.length, 1);
});

test('aborting a stream cancels the request, and the server keeps serving', opts, async () => {
  const before = await metrics();
  const controller = new AbortController();
  const stream = await openai().chat.completions.create(
    {
      model: MODEL,
      messages: [{ role: 'user', content: 'Write a very long story.' }],
      max_tokens: 4000,
      temperature: 0,
      stream: true,
    },
    { signal: controller.signal },
  );
  let received = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta) received++;
      if (received === 3) controller.abort();
    }
  } catch (err) {
    // Depending on where the abort lands the SDK ends the loop or throws its abort error.
    assert.match(err.name + err.constructor.name, /Abort/, String(err));
  }
  assert.equal(received, 3);
  const after = await eventually(
    metrics,
    (m) => m.hearth_requests_cancelled_total > before.hearth_requests_cancelled_total,
    'hearth_requests_cancelled_total did not go up',
  );
  assert.ok(after.hearth_requests_cancelled_total >= before.hearth_requests_cancelled_total + 1);
  await assertStillServes();
});

test('several concurrent streams all finish', opts, async () => {
  const client = openai();
  const n = 6; // more than the server's 4 parallel slots: two wait in its queue
  const runs = [];
  for (let i = 0; i < n; i++) {
    runs.push(
      (async () => {
        const stream = await client.chat.completions.create({
          model: MODEL,
          messages: [{ role: 'user', content: `Tell me fact number ${i}.` }],
          max_tokens: 10,
          stream: true,
          stream_options: { include_usage: true },
        });
        let finish;
        let usage;
        for await (const chunk of stream) {
          if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
          if (chunk.usage) usage = chunk.usage;
        }
        return { finish, usage };
      })(),
    );
  }
  const results = await Promise.all(runs);
  for (const r of results) {
    assert.ok(r.finish, 'a stream ended without finish_reason');
    assert.ok(r.usage.completion_tokens <= 10);
  }
});

test('GET /v1/models lists the model', opts, async () => {
  const page = await openai().models.list();
  const ids = page.data.map((m) => m.id);
  assert.ok(ids.length >= 1);
  assert.equal(page.data[0].object, 'model');
});
