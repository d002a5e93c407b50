// One round of benchmarks/serve_load.sh: CLIENTS workers share REQUESTS requests to ds-serve over
// plain node:http (no npm packages). Mixed on purpose: streamed and whole answers, n = 2, logprobs,
// stop strings, chat; every 4th streamed request is dropped after its first chunk (the client
// disconnects mid-stream). Prints one JSON object: answered (complete 200s), dropped (200s the
// client left), refused (429/503 with OpenAI's error JSON), failed (anything else) and errors.
//   node serve_load.mjs http://127.0.0.1:PORT CLIENTS REQUESTS ROUND
import http from 'node:http';

const [base, clientsArg, requestsArg, roundArg] = process.argv.slice(2);
const clients = Number(clientsArg), requests = Number(requestsArg), round = Number(roundArg ?? 1);
const agent = new http.Agent({ keepAlive: true, maxSockets: clients });

function body(i) {
  const chat = i % 7 === 5;
  const b = { max_tokens: 8 + (i % 5) * 8, temperature: 0.8, seed: round * 100000 + i, stream: i % 3 !== 0 };
  if (i % 6 === 1) b.n = 2;
  if (i % 5 === 2) b.stop = ['\n', 'ab'];
  if (i % 8 === 3) Object.assign(b, chat ? { logprobs: true, top_logprobs: 2 } : { logprobs: 2 });
  if (i % 9 === 4) Object.assign(b, { presence_penalty: 0.5, frequency_penalty: 0.5 });
  if (chat) b.messages = [{ role: 'user', content: `Round ${round}, request ${i}` }];
  else b.prompt = `Round ${round}, request ${i}:`;
  return { path: chat ? '/v1/chat/completions' : '/v1/completions', json: JSON.stringify(b), stream: b.stream };
}

// → 'answered' | 'dropped' | 'refused' | 'failed: why'
function one(i) {
  const { path, json, stream } = body(i);
  const drop = stream && i % 4 === 3;
  return new Promise((resolve) => {
    const req = http.request(base + path, { method: 'POST', agent, headers: { 'Content-Type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        text += d;
        if (drop && res.statusCode === 200) {
          req.destroy();  // the client goes away mid-stream
          resolve('dropped');
        }
      });
      res.on('end', () => {
        if (res.statusCode === 429 || res.statusCode === 503) {
          try {
            return resolve(JSON.parse(text).error ? 'refused' : 'failed: refusal without error JSON');
          } catch { return resolve('failed: refusal not JSON'); }
        }
        if (res.statusCode !== 200) return resolve(`failed: status ${res.statusCode}: ${text.slice(0, 200)}`);
        if (stream) return resolve(text.endsWith('data: [DONE]\n\n') ? 'answered' : 'failed: stream without [DONE]');
        try {
          return resolve(JSON.parse(text).choices?.length ? 'answered' : 'failed: no choices');
        } catch { return resolve('failed: body not JSON'); }
      });
      res.on('error', (e) => resolve(drop ? 'dropped' : `failed: ${e}`));
    });
    req.on('error', (e) => resolve(drop ? 'dropped' : `failed: ${e}`));
    req.end(json);
  });
}

const counts = { answered: 0, dropped: 0, refused: 0, failed: 0, errors: [] };
let next = 0;
const t0 = Date.now();
async function worker() {
  while (next < requests) {
    const r = await one(next++);
    if (r.startsWith('failed')) {
      counts.failed++;
      if (counts.errors.length < 5) counts.errors.push(r);
    } else {
      counts[r]++;
    }
  }
}
await Promise.all(Array.from({ length: clients }, worker));
counts.seconds = (Date.now() - t0) / 1000;
agent.destroy();
console.log(JSON.stringify(counts));
