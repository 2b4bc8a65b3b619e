// The Anthropic SDK against hearth: messages whole and streamed, system blocks with
// cache_control, tools, thinking, count_tokens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { anthropic, MODEL, TEST_TIMEOUT_MS } from './lib.js';

const opts = { timeout: TEST_TIMEOUT_MS };

const TOOLS = [
  {
    name: 'get_weather',
    description: 'Current weather for a city',
    input_schema: {
      type: 'object',
      properties: { city: { type: 'string', description: 'City name' }, unit: { type: 'string', enum: ['c', 'f'] } },
      required: ['city'],
    },
  },
  { name: 'list_files', description: 'Lists files', input_schema: { type: 'object', properties: {} } },
];

const SYSTEM = [
  { type: 'text', text: 'You are a helpful assistant.' },
  { type: 'text', text: 'Answer briefly.', cache_control: { type: 'ephemeral' } },
];

function assertUsage(usage) {
  assert.equal(typeof usage.input_tokens, 'number');
  assert.equal(typeof usage.output_tokens, 'number');
  assert.equal(typeof usage.cache_read_input_tokens, 'number');
  assert.equal(typeof usage.cache_creation_input_tokens, 'number');
}

// Checks the order of a Messages stream's events:
// message_start (content_block_start content_block_delta* content_block_stop)*
// message_delta message_stop, with ping allowed anywhere after message_start.
function assertEventOrder(types) {
  const t = types.filter((x) => x !== 'ping');
  assert.equal(t[0], 'message_start', t.join(' '));
  assert.deepEqual(t.slice(-2), ['message_delta', 'message_stop'], t.join(' '));
  let open = false;
  for (const x of t.slice(1, -2)) {
    if (x === 'content_block_start') {
      assert.ok(!open, `block opened inside a block: ${t.join(' ')}`);
      open = true;
    } else if (x === 'content_block_delta') {
      assert.ok(open, `delta outside a block: ${t.join(' ')}`);
    } else if (x === 'content_block_stop') {
      assert.ok(open, `stop without start: ${t.join(' ')}`);
      open = false;
    } else {
      assert.fail(`unexpected event ${x} in ${t.join(' ')}`);
    }
  }
  assert.ok(!open, `a block was left open: ${t.join(' ')}`);
}

test('message, not streamed', opts, async () => {
  const m = await anthropic().messages.create({
    model: MODEL,
    max_tokens: 8,
    system: SYSTEM,
    messages: [{ role: 'user', content: 'Say hello.' }],
    temperature: 0,
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.ok(Array.isArray(m.content));
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assertUsage(m.usage);
  assert.ok(m.usage.input_tokens + m.usage.cache_creation_input_tokens + m.usage.cache_read_input_tokens > 0);
  assert.ok(m.usage.output_tokens <= 8);
});

test('message, streamed: events in order, and the SDK builds the message from them', opts, async () => {
  const req = {
    model: MODEL,
    max_tokens: 16,
    system: SYSTEM,
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Tell me about rivers.', cache_control: { type: 'ephemeral' } }] },
    ],
    temperature: 0,
  };
  const client = anthropic();
  const stream = await client.messages.create({ ...req, stream: true });
  const types = [];
  let start;
  let delta;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'message_start') start = ev.message;
    if (ev.type === 'message_delta') delta = ev;
  }
  assertEventOrder(types);
  assert.equal(start.role, 'assistant');
  assert.deepEqual(start.content, []);
  assertUsage(start.usage);
  assert.ok(['end_turn', 'max_tokens'].includes(delta.delta.stop_reason));
  assert.ok(delta.usage.output_tokens > 0 && delta.usage.output_tokens <= 16);

  // The SDK's stream helper builds the message from the same events the stream carried.
  const helper = client.messages.stream(req);
  let text = '';
  let thinking = '';
  helper.on('streamEvent', (ev) => {
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    if (ev.type === 'content_block_delta' && ev.delta.type === 'thinking_delta') thinking += ev.delta.thinking;
  });
  const message = await helper.finalMessage();
  const joined = (type, field) => message.content.filter((b) => b.type === type).map((b) => b[field]).join('');
  assert.equal(joined('text', 'text'), text);
  assert.equal(joined('thinking', 'thinking'), thinking);
  assert.ok(text.length + thinking.length > 0, 'nothing streamed');
  assert.ok(['end_turn', 'max_tokens'].includes(message.stop_reason));
});

test('tools with input_schema are accepted, whole and streamed', opts, async () => {
  const client = anthropic();
  const req = {
    model: MODEL,
    max_tokens: 24,
    tools: TOOLS,
    tool_choice: { type: 'auto' },
    messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
  };
  const m = await client.messages.create(req);
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(m.stop_reason), m.stop_reason);
  for (const b of m.content) {
    if (b.type === 'tool_use') {
      assert.equal(typeof b.name, 'string');
      assert.equal(typeof b.input, 'object');
    }
  }
  const types = [];
  for await (const ev of await client.messages.create({ ...req, stream: true })) types.push(ev.type);
  assertEventOrder(types);

  // A full tool round trip renders.
  const followUp = await client.messages.create({
    model: MODEL,
    max_tokens: 4,
    tools: TOOLS,
    messages: [
      { role: 'user', content: 'What is the weather in Oslo?' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'text', text: 'Rain, 7C' }] },
          { type: 'text', text: 'And tomorrow?' },
        ],
      },
    ],
  });
  assert.equal(followUp.type, 'message');
});

test('thinking enabled', opts, async () => {
  const client = anthropic();
  const req = {
    model: MODEL,
    max_tokens: 32,
    thinking: { type: 'enabled', budget_tokens: 16 },
    messages: [{ role: 'user', content: 'Think, then answer: 2 + 2?' }],
  };
  const m = await client.messages.create(req);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  for (const b of m.content) assert.ok(['thinking', 'text'].includes(b.type), b.type);
  // With thinking on the template opens a think block: a random model writes into it.
  const thinking = m.content.filter((b) => b.type === 'thinking');
  for (const b of thinking) assert.equal(typeof b.signature, 'string');

  const types = [];
  for await (const ev of await client.messages.create({ ...req, stream: true })) {
    types.push(ev.type);
    if (ev.type === 'content_block_start') assert.ok(['thinking', 'text'].includes(ev.content_block.type));
  }
  assertEventOrder(types);

  // Earlier thinking blocks sent back (with their signatures) are accepted.
  const again = await client.messages.create({
    model: MODEL,
    max_tokens: 4,
    thinking: { type: 'enabled', budget_tokens: 16 },
    messages: [
      { role: 'user', content: 'Think, then answer: 2 + 2?' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'Easy.', signature: '' }, { type: 'text', text: '4' }] },
      { role: 'user', content: 'And 3 + 3?' },
    ],
  });
  assert.equal(again.type, 'message');
});

test('count_tokens', opts, async () => {
  const client = anthropic();
  const base = { model: MODEL, messages: [{ role: 'user', content: 'Hello there' }] };
  const small = await client.messages.countTokens(base);
  assert.ok(Number.isInteger(small.input_tokens) && small.input_tokens > 0);
  const withSystem = await client.messages.countTokens({ ...base, system: SYSTEM });
  assert.ok(withSystem.input_tokens > small.input_tokens);
  const withTools = await client.messages.countTokens({ ...base, tools: TOOLS });
  assert.ok(withTools.input_tokens > small.input_tokens);
  // The count is the prompt a real request prefills.
  const m = await client.messages.create({ ...base, max_tokens: 1 });
  // Anthropic's three input counts add up to the prompt.
  assert.equal(m.usage.input_tokens + m.usage.cache_creation_input_tokens + m.usage.cache_read_input_tokens,
               small.input_tokens);
});
