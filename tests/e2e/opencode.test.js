// opencode, headless (`opencode run`), two turns of one session against hearth through the
// logging proxy (lib.js), with an OpenAI-compatible provider that points at it.
//
// The second turn (`--continue`) resends the first turn's conversation: hearth must serve
// it from the cache. Captured requests and the runs go to $HEARTH_E2E_OUT/opencode/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { API_KEY, CTX, MODEL, assertStillServes, startProxy, proxyUrl, runAgent, whyCannotRun, makeSandbox, saveCaptured, assertTwoTurnSession } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = path.join(here, 'node_modules', '.bin', 'opencode');
const RUN_TIMEOUT_MS = 120_000;
const PLUGIN_VERSION = JSON.parse(fs.readFileSync(path.join(here, 'node_modules', 'opencode-ai', 'package.json'), 'utf8')).version;

let proxy;
const captured = [];
let box;

before(async () => {
  proxy = await startProxy(captured);
  box = makeSandbox('hearth-opencode-');
  // opencode installs @opencode-ai/plugin (for plugins written in the config directory)
  // from npm into each config directory at start, in the background, unless that
  // directory's node_modules exists and its package-lock.json already names the package.
  // This run has no plugins: say it is there, so nothing is fetched.
  const dir = path.join(box.xdg.XDG_CONFIG_HOME, 'opencode');
  const deps = { '@opencode-ai/plugin': PLUGIN_VERSION };
  fs.mkdirSync(path.join(dir, 'node_modules'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ dependencies: deps }));
  fs.writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies: deps } } }));
});

after(() => {
  proxy?.close();
  if (box) fs.rmSync(box.root, { recursive: true, force: true });
});

// The provider, and nothing that reaches past it: no models.dev list, no share, no update
// check, no LSP downloads, no plugins fetched from npm.
function config() {
  return {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      hearth: {
        npm: '@ai-sdk/openai-compatible',
        name: 'hearth',
        options: { baseURL: `${proxyUrl(proxy)}/v1`, apiKey: API_KEY },
        models: { [MODEL]: { name: MODEL, limit: { context: CTX, output: 64 } } },
      },
    },
    enabled_providers: ['hearth'],
    model: `hearth/${MODEL}`,
    small_model: `hearth/${MODEL}`,
    autoupdate: false,
    share: 'disabled',
    lsp: false,
    formatter: false,
    plugin: [],
  };
}

function env() {
  return {
    PATH: process.env.PATH,
    ...box.xdg,
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config()),
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_SHARE: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
    OPENCODE_DISABLE_EXTERNAL_SKILLS: '1',
  };
}

test('opencode runs two turns of one session against hearth, the second from the cache', { timeout: 2 * RUN_TIMEOUT_MS + 30_000 }, async (t) => {
  const why = whyCannotRun(bin, env());
  assert.equal(why, null, `opencode cannot run: ${why}`);
  const runs = [];
  const turn = async (args) => {
    const r = await runAgent(bin, args, { cwd: box.work, env: env(), timeoutMs: RUN_TIMEOUT_MS });
    runs.push(`opencode ${args.join(' ')}: exit ${r.code} ${r.signal ?? ''}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n`);
    return r;
  };
  const first = await turn(['run', '--pure', '--format', 'json', 'say hi']);
  const second = await turn(['run', '--pure', '--format', 'json', '--continue', 'say more']);
  const dir = saveCaptured('opencode', captured, runs);

  assert.equal(first.code, 0, runs[0]);
  assert.equal(second.code, 0, runs[1]);
  // --format json prints one event a line; a turn ends with step_finish and has no error.
  const steps = [first, second].map((r) => {
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(events.filter((e) => e.type === 'error'), []);
    const finish = events.filter((e) => e.type === 'step_finish');
    assert.equal(finish.length, 1, r.stdout);
    return finish[0].part;
  });

  const turns = assertTwoTurnSession(captured, { firstPrompt: 'say hi', secondPrompt: 'say more', minReused: 0.95 });
  assert.equal(steps[1].tokens.cache.read, turns[1].reused_tokens, 'opencode counts the reused tokens');
  fs.writeFileSync(path.join(dir, 'usage.json'), JSON.stringify(turns, null, 1));
  t.diagnostic(`opencode turns (prompt / reused / prefilled): ${turns.map((u) => `${u.prompt_tokens} / ${u.reused_tokens} / ${u.prefilled_tokens}`).join(', ')}`);
  await assertStillServes();
});
