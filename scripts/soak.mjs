// Soak (docs/reliability.md): many concurrent streaming clients against one `hearth serve`
// for a while, with hang-ups mid-stream, prefills aborted before the first token, malformed
// requests mixed in, and conversations that grow until they are started over. Checks:
//  - no 5xx and no request left unanswered (every request the client did not cut ends
//    with a complete response: a stream's final event, or a whole JSON body);
//  - every well-formed request gets 200 and every malformed one a 4xx;
//  - resident memory stays within the bound derived from the server's start-up log
//    (weights + context buffers + --cache-ram + the disk writer's queue + overhead);
//  - open file descriptors and threads do not grow: counted once the server has gone quiet
//    after a warm-up and again, quiet, at the end;
//  - the server is alive at the end and still answers.
//
// Usage: node scripts/soak.mjs HEARTH MODEL.gguf [--seconds 600] [--clients 32] [--seed N] [--sanitized]
//          [--threads 1] [--json FILE]
// Linux (/proc) and macOS (ps, lsof). Node's built-in modules only. Exits 1 on any failure.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const [hearth, model] = argv;
if (!hearth || !model) {
  console.error('usage: node scripts/soak.mjs HEARTH MODEL.gguf [--seconds S] [--clients N] [--seed N] [--json FILE] [--sanitized]');
  process.exit(2);
}
const seconds = Number(opt('--seconds', 600));
const sanitized = argv.includes('--sanitized');
const nClients = Number(opt('--clients', 32));
const seed = Number(opt('--seed', Date.now() % 100000));
const warmupSeconds = Math.min(60, Math.max(10, seconds / 10));
const config = { ctx: 8192, parallel: 4, cacheSeqs: 4, cacheRamMiB: 64, cacheDiskMiB: 128, maxBodyMiB: 1 };
const log = (...a) => console.log('soak:', ...a);

// mulberry32: reproducible choices for a given --seed.
let rngState = seed >>> 0;
function rand() {
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const words = 'river stone cloud lamp garden engine window paper signal forest harbor copper violin marble ladder winter'.split(' ');
const sentence = (n) => Array.from({ length: n }, () => pick(words)).join(' ') + '.';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the server
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-soak-'));
const errLog = path.join(work, 'serve.err');
const server = spawn(hearth, ['serve', '-m', model, '--port', '0', '-t', opt('--threads', '1'),
  '-c', String(config.ctx), '-P', String(config.parallel), '--cache-seqs', String(config.cacheSeqs),
  '--cache-ram', String(config.cacheRamMiB), '--cache-dir', path.join(work, 'states'),
  '--cache-disk', String(config.cacheDiskMiB), '--max-queue', String(nClients * 2),
  '--max-body', String(config.maxBodyMiB << 20)], { stdio: ['ignore', 'pipe', fs.openSync(errLog, 'w')] });
let serverExit = null;
server.on('exit', (code, signal) => { serverExit = { code, signal }; });
const port = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', (d) => {
    out += d;
    const m = /listening on [\d.]+:(\d+)/.exec(out);
    if (m) resolve(Number(m[1]));
  });
  server.on('exit', () => reject(new Error('hearth serve exited at start:\n' + fs.readFileSync(errLog, 'utf8').slice(-2000))));
  setTimeout(() => reject(new Error('hearth serve did not start in 120 s')), 120_000);
});
const pid = server.pid;

// The bound: what the start-up log says the context needs (weights, fixed buffers, KV and
// compute for every cell), the RAM tier, the disk writer's queue (64 MiB at most,
// cache.md), 5 % and a fixed 160 MiB for the process itself (code, libraries, template
// and tokenizer, thread stacks, HTTP buffers).
function memoryBoundMiB() {
  const line = fs.readFileSync(errLog, 'utf8').split('\n').find((l) => l.startsWith('hearth: memory:')) ?? '';
  const needs = [...line.matchAll(/needs ([\d.]+) (B|KiB|MiB|GiB) of/g)];  // one per memory pool
  if (!needs.length) throw new Error('no "memory: ... needs ... of ... free" line in the start-up log');
  const scale = { B: 1 / 1048576, KiB: 1 / 1024, MiB: 1, GiB: 1024 };
  const context = needs.reduce((sum, m) => sum + Number(m[1]) * scale[m[2]], 0);
  const bound = (context + config.cacheRamMiB + 64) * 1.05 + 160;
  // Under AddressSanitizer (--sanitized: `make test-asan`) every allocation carries
  // redzones and shadow memory, and freed memory waits in a 256 MiB quarantine: twice the
  // bound plus the quarantine (seen: 1,165 MiB against a plain bound of 653).
  return { context, bound: sanitized ? 2 * bound + 256 : bound };
}
const { context: contextMiB, bound: boundMiB } = memoryBoundMiB();

function sample() {
  if (process.platform === 'linux') {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return {
      rssMiB: Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024,
      threads: fs.readdirSync(`/proc/${pid}/task`).length,
      fds: fs.readdirSync(`/proc/${pid}/fd`).length,
    };
  }
  const ps = execFileSync('ps', ['-o', 'rss=', '-M', '-p', String(pid)], { encoding: 'utf8' }).trim().split('\n');
  const lsof = execFileSync('lsof', ['-p', String(pid)], { encoding: 'utf8' }).trim().split('\n');
  return { rssMiB: Number(ps[0].trim().split(/\s+/).pop()) / 1024, threads: ps.length - 1, fds: lsof.length - 1 };
}
let maxRss = 0;
const rssTimer = setInterval(() => { if (!serverExit) maxRss = Math.max(maxRss, sample().rssMiB); }, 1000);

// Quiet: no request in flight; idle HTTP workers exit after 3 s and kept-alive connections
// close after 5 s, so wait until fds and threads hold still for 3 s (at most 30 s).
async function quietSample() {
  let last = null, still = 0;
  for (let i = 0; i < 30; i++) {
    await sleep(1000);
    const s = sample();
    still = last && s.fds === last.fds && s.threads === last.threads ? still + 1 : 0;
    last = s;
    if (i >= 6 && still >= 3) break;
  }
  return last;
}

// ---- requests
const counts = { requests: 0, ok: 0, cut: 0, aborted_prefill: 0, malformed_4xx: 0, status5xx: 0,
  unanswered: 0, unexpected: 0 };
const problems = [];
function problem(kind, what) {
  counts[kind]++;
  if (problems.length < 30) problems.push(`${kind}: ${what}`);
}

// Sends one request; `cut` (optional) decides after each streamed event or timer whether to
// hang up. Resolves {status, body, events, complete, cutByUs, error}.
function send({ method = 'POST', route, body, headers = {}, stream = false, cutAfterEvents, cutAfterMs, timeoutMs = 240_000 }) {
  return new Promise((resolve) => {
    const data = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body);
    const req = http.request({ host: '127.0.0.1', port, method, path: route, agent: false,
      headers: { 'content-type': 'application/json', ...(data ? { 'content-length': data.length } : {}), ...headers } });
    const out = { status: 0, body: '', events: 0, complete: false, cutByUs: false, error: null };
    let done = false;
    const finish = () => { if (!done) { done = true; clearTimeout(timer); clearTimeout(cutTimer); resolve(out); } };
    const cut = () => { if (!done) { out.cutByUs = true; req.destroy(); finish(); } };
    const timer = setTimeout(() => { out.error = 'client timeout'; req.destroy(); finish(); }, timeoutMs);
    const cutTimer = cutAfterMs !== undefined ? setTimeout(cut, cutAfterMs) : null;
    req.on('response', (res) => {
      out.status = res.statusCode;
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        out.body += chunk;
        if (stream && res.statusCode === 200) {
          out.events = (out.body.match(/\n\n/g) || []).length;
          if (cutAfterEvents !== undefined && out.events >= cutAfterEvents) cut();
        }
      });
      res.on('end', () => { out.complete = true; finish(); });
      res.on('error', (e) => { out.error = String(e); finish(); });
      res.on('close', () => { if (!res.complete && !out.error) out.error = 'connection closed mid-response'; finish(); });
    });
    req.on('error', (e) => { out.error = String(e.code || e); finish(); });
    if (data) req.write(data);
    req.end();
  });
}

const streamEnded = (flavor, text) => (flavor === 'openai' ? text.includes('data: [DONE]') : text.includes('event: message_stop'));

function chatBody(flavor, conv, extra = {}) {
  const msgs = conv.messages;
  if (flavor === 'openai') {
    const usage = extra.stream ? { stream_options: { include_usage: true } } : {};
    return { messages: [{ role: 'system', content: conv.system }, ...msgs], max_tokens: 16 + Math.floor(rand() * 24), ...usage, ...extra };
  }
  return { system: conv.system, messages: msgs, max_tokens: 16 + Math.floor(rand() * 24), ...extra };
}
// The reply text out of a stream (to grow the conversation with it) and the prompt size.
function parseStream(flavor, text) {
  let reply = '', promptTokens = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    let ev;
    try { ev = JSON.parse(line.slice(6)); } catch { continue; }
    if (flavor === 'openai') {
      reply += ev.choices?.[0]?.delta?.content ?? '';
      if (ev.usage) promptTokens = ev.usage.prompt_tokens;
    } else {
      if (ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta') reply += ev.delta.text;
      const u = ev.type === 'message_start' ? ev.message?.usage : ev.type === 'message_delta' ? ev.usage : null;
      if (u && u.input_tokens !== undefined) promptTokens = u.input_tokens + (u.cache_read_input_tokens ?? 0);
    }
  }
  return { reply, promptTokens };
}
const routeOf = (flavor) => (flavor === 'openai' ? '/v1/chat/completions' : '/v1/messages');

const userMsg = (text) => ({ role: 'user', content: text });
const newConversation = (id) => ({ system: `You are client ${id}. ${sentence(40)}`, messages: [userMsg(sentence(20))] });

// Malformed requests: each must get a 4xx (and the server must go on).
const bigNesting = '{"messages":' + '['.repeat(5000) + ']'.repeat(5000) + '}';
const malformed = [
  () => ({ route: '/v1/chat/completions', body: '{' }),
  () => ({ route: '/v1/chat/completions', body: 'not json at all' }),
  () => ({ route: '/v1/chat/completions', body: '' }),
  () => ({ route: '/v1/chat/completions', body: '{"messages": "hello"}' }),
  () => ({ route: '/v1/chat/completions', body: '{"messages": []}' }),
  () => ({ route: '/v1/chat/completions', body: '{"messages": [{"role": "wizard", "content": "x"}]}' }),
  () => ({ route: '/v1/chat/completions', body: '{"messages": [{"role": "user", "content": 42}]}' }),
  () => ({ route: '/v1/chat/completions', body: '{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}' }),
  () => ({ route: '/v1/chat/completions', body: '{"messages": [{"role": "user", "content": "x"}], "max_tokens": -3}' }),
  () => ({ route: '/v1/chat/completions', body: bigNesting }),
  () => ({ route: '/v1/chat/completions', body: Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "'),
    Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}], "stream": true}')]) }),
  () => ({ route: '/v1/chat/completions', body: JSON.stringify({ messages: [userMsg('x'.repeat((config.maxBodyMiB << 20) + 10))] }) }),
  () => ({ route: '/v1/messages', body: '{"messages": [{"role": "user", "content": "x"}]}' }),  // no max_tokens
  () => ({ route: '/v1/messages', body: '{"max_tokens": 8, "messages": [{"role": "assistant"}], "stream": true}' }),
  () => ({ route: '/v1/completions', body: '{"prompt": {"a": 1}}' }),
  () => ({ route: '/v1/nothing-here', body: '{}' }),
  () => ({ method: 'GET', route: '/v1/chat/completions' }),
];

let running = true, paused = false, inFlight = 0;
async function client(id) {
  const flavor = id % 2 ? 'anthropic' : 'openai';
  let conv = newConversation(id);
  while (running) {
    if (paused) { await sleep(200); continue; }
    inFlight++;
    try { conv = await oneAction(id, flavor, conv); } finally { inFlight--; }
  }
}

async function oneAction(id, flavor, conv) {
  counts.requests++;
  const r = rand();
  if (r < 0.15) {  // malformed
    const m = pick(malformed)();
    const res = await send(m);
    if (res.status >= 500) problem('status5xx', `${m.route} ${res.status} ${res.body.slice(0, 200)}`);
    else if (res.status >= 400 && res.status < 500) counts.malformed_4xx++;
    else if (res.error) problem('unanswered', `malformed ${m.route}: ${res.error}`);
    else problem('unexpected', `malformed ${m.route} got ${res.status}: ${res.body.slice(0, 200)}`);
    return conv;
  }
  if (r < 0.25) {  // aborted prefill: a long new message, the client gives up before the first token
    const big = { ...conv, messages: [...conv.messages.slice(0, -1), userMsg(sentence(1500))] };
    const res = await send({ route: routeOf(flavor), body: JSON.stringify(chatBody(flavor, big, { stream: true })),
      stream: true, cutAfterMs: 5 + Math.floor(rand() * 300) });
    if (res.status >= 500) problem('status5xx', `aborted prefill ${res.status} ${res.body.slice(0, 200)}`);
    else if (res.cutByUs) counts.aborted_prefill++;
    else if (res.status === 200 && streamEnded(flavor, res.body)) counts.ok++;
    else problem(res.error ? 'unanswered' : 'unexpected', `long prompt: ${res.status} ${res.error ?? res.body.slice(0, 200)}`);
    return conv;
  }
  const stream = r < 0.95;
  const hangUp = stream && r < 0.45;
  const res = await send({ route: routeOf(flavor), body: JSON.stringify(chatBody(flavor, conv, { stream, temperature: rand() < 0.5 ? 0 : 0.8 })),
    stream, cutAfterEvents: hangUp ? 1 + Math.floor(rand() * 8) : undefined });
  if (res.status >= 500) { problem('status5xx', `${flavor} ${res.status} ${res.body.slice(0, 200)}`); return conv; }
  if (res.cutByUs) { counts.cut++; return conv; }
  if (res.error) { problem('unanswered', `${flavor} stream=${stream}: ${res.error} after ${res.body.length} bytes`); return conv; }
  if (res.status !== 200) { problem('unexpected', `${flavor} ${res.status}: ${res.body.slice(0, 300)}`); return newConversation(id); }
  let reply, promptTokens;
  if (stream) {
    if (!streamEnded(flavor, res.body)) { problem('unanswered', `${flavor} stream without its final event`); return conv; }
    ({ reply, promptTokens } = parseStream(flavor, res.body));
  } else {
    let j;
    try { j = JSON.parse(res.body); } catch { problem('unanswered', `${flavor} whole response not JSON`); return conv; }
    reply = flavor === 'openai' ? j.choices[0].message.content ?? '' : (j.content.find((b) => b.type === 'text')?.text ?? '');
    promptTokens = flavor === 'openai' ? j.usage.prompt_tokens : j.usage.input_tokens + (j.usage.cache_read_input_tokens ?? 0);
  }
  counts.ok++;
  // The conversation grows by the reply and a new message, up to about 1,500 tokens.
  if (promptTokens > 1500) return newConversation(id);
  return { ...conv, messages: [...conv.messages, { role: 'assistant', content: reply || '.' }, userMsg(sentence(10 + Math.floor(rand() * 40)))] };
}

// What the RAM tier holds (from /metrics), to tell its filling from other growth.
async function ramTierMiB() {
  const res = await send({ method: 'GET', route: '/metrics', timeoutMs: 30_000 });
  const m = /hearth_cache_bytes\{tier="ram"\} (\d+)/.exec(res.body);
  return m ? `${(Number(m[1]) / 1048576).toFixed(1)} MiB` : 'unknown';
}
const reportEveryMs = Math.min(60_000, seconds * 100);

// ---- the run
log(`seed ${seed}, ${nClients} clients for ${seconds} s (warm-up ${warmupSeconds} s), pid ${pid}, port ${port}`);
log(`memory bound ${boundMiB.toFixed(0)} MiB: context ${contextMiB.toFixed(1)} + --cache-ram ${config.cacheRamMiB} + disk queue 64, +5 %, + 160 overhead${sanitized ? "; x 2 + 256 under AddressSanitizer" : ""}`);
const start = Date.now();
const clients = Array.from({ length: nClients }, (_, i) => client(i));
await sleep(warmupSeconds * 1000);
paused = true;
while (inFlight > 0) await sleep(100);
const base = await quietSample();
const requestsAtBase = counts.requests;
log(`after warm-up (${requestsAtBase} requests), quiet: RSS ${base.rssMiB.toFixed(1)} MiB, ${base.fds} fds, ${base.threads} threads`);
paused = false;
let lastReport = Date.now();
while (Date.now() - start < seconds * 1000 && !serverExit) {
  await sleep(1000);
  if (Date.now() - lastReport > reportEveryMs) {
    lastReport = Date.now();
    const s = sample();
    log(`${Math.round((Date.now() - start) / 1000)} s: ${JSON.stringify(counts)}; RSS ${s.rssMiB.toFixed(1)} MiB ` +
        `(RAM tier ${await ramTierMiB()}), ${s.fds} fds, ${s.threads} threads`);
  }
}
running = false;
await Promise.all(clients);
const end = serverExit ? null : await quietSample();
let finalOk = false;
if (!serverExit) {
  const res = await send({ route: '/v1/chat/completions', body: JSON.stringify({ messages: [userMsg('Still there?')], max_tokens: 4 }) });
  finalOk = res.status === 200 && res.complete;
}
clearInterval(rssTimer);
const elapsed = (Date.now() - start) / 1000;

const failures = [];
if (serverExit) failures.push(`the server exited: ${JSON.stringify(serverExit)}`);
if (counts.status5xx) failures.push(`${counts.status5xx} responses with 5xx`);
if (counts.unanswered) failures.push(`${counts.unanswered} requests unanswered`);
if (counts.unexpected) failures.push(`${counts.unexpected} requests with an unexpected status`);
if (maxRss > boundMiB) failures.push(`resident memory reached ${maxRss.toFixed(0)} MiB, over the bound ${boundMiB.toFixed(0)}`);
if (end && end.fds > base.fds) failures.push(`file descriptors grew from ${base.fds} to ${end.fds}`);
if (end && end.threads > base.threads) failures.push(`threads grew from ${base.threads} to ${end.threads}`);
if (!serverExit && !finalOk) failures.push('the server did not answer a last request');
if (counts.ok === 0 || counts.cut === 0 || counts.malformed_4xx === 0) failures.push('a kind of request never ran');

const summary = { seed, clients: nClients, seconds: Math.round(elapsed), ...counts, memory_bound_mib: Math.round(boundMiB),
  rss_after_warmup_mib: +base.rssMiB.toFixed(1), rss_max_mib: +maxRss.toFixed(1), rss_end_mib: end ? +end.rssMiB.toFixed(1) : null,
  fds_after_warmup: base.fds, fds_end: end?.fds ?? null, threads_after_warmup: base.threads, threads_end: end?.threads ?? null,
  failures };
log(`done: ${JSON.stringify(summary)}`);
for (const p of problems) log(`  ${p}`);
if (opt('--json')) fs.writeFileSync(opt('--json'), JSON.stringify(summary, null, 2) + '\n');
if (!serverExit) server.kill('SIGTERM');
await new Promise((r) => (serverExit ? r() : server.on('exit', r)));
if (failures.length) {
  log('FAILED: ' + failures.join('; '));
  log('--- server log (end)\n' + fs.readFileSync(errLog, 'utf8').split('\n').slice(-30).join('\n'));
  process.exit(1);
}
fs.rmSync(work, { recursive: true, force: true });
log('ok');
