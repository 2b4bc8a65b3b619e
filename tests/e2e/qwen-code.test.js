// Qwen Code, headless (`qwen -p`), two turns of one session against hearth through the
// logging proxy (lib.js), as an OpenAI-compatible provider.
//
// The second turn (`--continue`) resends the first turn's conversation: hearth must serve
// it from the cache. Captured requests and the runs go to $HEARTH_E2E_OUT/qwen-code/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { API_KEY, CTX, MODEL, assertStillServes, startProxy, proxyUrl, runAgent, whyCannotRun, makeSandbox, saveCaptured, assertTwoTurnSession, replyUsage } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = path.join(here, 'node_modules', '.bin', 'qwen');
const RUN_TIMEOUT_MS = 120_000;

let proxy;
const captured = [];
let box;

before(async () => {
  proxy = await startProxy(captured);
  box = makeSandbox('hearth-qwen-');
  // The provider, and nothing that reaches past it: no update check, usage statistics or
  // telemetry. The background memory agents (each turn's memory extraction: nine more
  // requests of 10k tokens) are off, to keep the run short; they are not the session.
  const settings = {
    security: { auth: { selectedType: 'openai' } },
    general: { enableAutoUpdate: false },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false, enableAutoSkill: false },
    model: { name: MODEL, generationConfig: { contextWindowSize: CTX, samplingParams: { max_tokens: 64 } } },
  };
  fs.mkdirSync(path.join(box.home, '.qwen'));
  fs.writeFileSync(path.join(box.home, '.qwen', 'settings.json'), JSON.stringify(settings, null, 2));
});

after(() => {
  proxy?.close();
  if (box) fs.rmSync(box.root, { recursive: true, force: true });
});

function env() {
  return {
    PATH: process.env.PATH,
    ...box.xdg,
    OPENAI_BASE_URL: `${proxyUrl(proxy)}/v1`,
    OPENAI_API_KEY: API_KEY,
    OPENAI_MODEL: MODEL,
    QWEN_USAGE_STATISTICS_ENABLED: '0',
    QWEN_TELEMETRY_ENABLED: '0',
  };
}

test('Qwen Code runs two turns of one session against hearth, the second from the cache', { timeout: 2 * RUN_TIMEOUT_MS + 30_000 }, async (t) => {
  const why = whyCannotRun(bin, env());
  assert.equal(why, null, `Qwen Code cannot run: ${why}`);
  const runs = [];
  const turn = async (args) => {
    const r = await runAgent(bin, args, { cwd: box.work, env: env(), timeoutMs: RUN_TIMEOUT_MS });
    runs.push(`qwen ${args.join(' ')}: exit ${r.code} ${r.signal ?? ''}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n`);
    return r;
  };
  const first = await turn(['-p', 'say hi', '--output-format', 'json']);
  const firstRunRequests = captured.length;
  const second = await turn(['-p', 'say more', '--continue', '--output-format', 'json']);
  const dir = saveCaptured('qwen-code', captured, runs);

  assert.equal(first.code, 0, runs[0]);
  assert.equal(second.code, 0, runs[1]);
  // Each run prints its events as one JSON array, the result last; its stats count the
  // session's requests so far (with the memory agents off, the main ones only), cached
  // tokens as hearth reported them.
  const results = [first, second].map((r) => JSON.parse(r.stdout).at(-1));
  for (const r of results) {
    assert.equal(r.type, 'result');
    assert.equal(r.is_error, false, JSON.stringify(r));
  }
  const mainCached = (r) => r.stats.models[MODEL].bySource.main.tokens.cached;

  // On --continue Qwen Code rebuilds the first turn's user message from its recording,
  // without the "current date" reminder it sent in it: the prompt leaves the first turn's
  // just before that message's end, and hearth's deepest state before there is at the end
  // of the system prompt and tools, so the first user message (the skills list, ~2k tokens)
  // is prefilled again.
  const turns = assertTwoTurnSession(captured, { firstPrompt: 'say hi', secondPrompt: 'say more', minReused: 0.75 });
  // (A run whose reply came out empty asks again: count every request of the second run.)
  const reusedInSecondRun = captured.slice(firstRunRequests).reduce((n, c) => n + replyUsage(c.reply).hearth_cache.reused_tokens, 0);
  assert.equal(mainCached(results[1]) - mainCached(results[0]), reusedInSecondRun, 'Qwen Code counts the reused tokens');
  fs.writeFileSync(path.join(dir, 'usage.json'), JSON.stringify(turns, null, 1));
  t.diagnostic(`Qwen Code turns (prompt / reused / prefilled): ${turns.map((u) => `${u.prompt_tokens} / ${u.reused_tokens} / ${u.prefilled_tokens}`).join(', ')}`);
  await assertStillServes();
});
