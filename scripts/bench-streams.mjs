// Aggregate decode throughput of N concurrent streams against one server (issue 15's
// "concurrency at the engine's limit"). For each N it starts N streaming /v1/completions
// requests at once, each with its own prompt, and times every streamed piece. The decode
// window is from the moment the last stream got its first piece (all N are decoding) to
// the moment the first stream ended (all N still were); the throughput is the pieces all
// streams received inside it, per second. That is what llama-batched-bench's S_TG
// measures for the same batch size (every sequence decoding in every step), without the
// prefill and the ragged ends.
//
// Usage: node scripts/bench-streams.mjs URL [--streams 4,8] [--prompt-words 96]
//          [--gen-tokens 128] [--reps 2] [--temperature 0] [--json FILE]
// (--temperature above 0 samples with the server's default top-k / top-p / min-p.)
// Each stream has a connection of its own: a kept-alive one can be closed by the server's
// idle timeout just as the next request goes out.
// Prints one line per N (best of --reps): N, tok/s, window seconds, pieces. Node's
// built-in modules only.
import fs from 'node:fs';
import http from 'node:http';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const url = new URL(argv[0] ?? '');
const streams = opt('--streams', '4,8').split(',').map(Number);
const promptWords = Number(opt('--prompt-words', 96));
const genTokens = Number(opt('--gen-tokens', 128));
const reps = Number(opt('--reps', 2));
const temperature = Number(opt('--temperature', 0));
const jsonOut = opt('--json', '');

const words = ['river', 'stone', 'lantern', 'orbit', 'copper', 'meadow', 'signal', 'harbor', 'ember', 'quartz'];
function prompt(stream, rep) {
  const out = [`Stream ${stream} run ${rep}:`];
  for (let i = 0; i < promptWords; i++) out.push(words[(i * 7 + stream * 3 + rep) % words.length]);
  return out.join(' ');
}

// One streaming request; resolves with the arrival time (ms) of every content piece.
function stream(text) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ prompt: text, max_tokens: genTokens, temperature, stream: true });
    const req = http.request(
      { host: url.hostname, port: url.port, path: '/v1/completions', method: 'POST', agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`HTTP ${res.statusCode}`));
          res.resume();
          return;
        }
        const times = [];
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          buf += chunk;
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line.startsWith('data:') || line.includes('[DONE]')) continue;
            const ev = JSON.parse(line.slice(5));
            if (ev.choices?.[0]?.text) times.push(performance.now());
          }
        });
        res.on('end', () => resolve(times));
        res.on('error', reject);
      });
    req.on('error', reject);
    req.end(body);
  });
}

async function measure(n, rep) {
  const all = await Promise.all(Array.from({ length: n }, (_, s) => stream(prompt(s, rep))));
  if (all.some((t) => t.length < 2)) throw new Error(`a stream of ${n} produced fewer than 2 pieces`);
  const start = Math.max(...all.map((t) => t[0]));
  const end = Math.min(...all.map((t) => t[t.length - 1]));
  const pieces = all.reduce((sum, t) => sum + t.filter((x) => x > start && x <= end).length, 0);
  const seconds = (end - start) / 1000;
  return { streams: n, tokens_per_s: seconds > 0 ? pieces / seconds : 0, window_s: seconds, pieces };
}

const results = [];
for (const n of streams) {
  let best = null;
  for (let rep = 0; rep < reps; rep++) {
    const r = await measure(n, rep);
    if (!best || r.tokens_per_s > best.tokens_per_s) best = r;
  }
  results.push(best);
  console.log(`streams=${best.streams} tokens_per_s=${best.tokens_per_s.toFixed(2)} window_s=${best.window_s.toFixed(2)} pieces=${best.pieces}`);
}
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(results, null, 2));
