// Drives ds-serve with the official `openai` npm client (installed by serve_npm_setup.sh) and
// prints one JSON object with what it saw; tests/inference/serve_http_test.cpp checks it.
//   node serve_openai_client.mjs basic BASE_URL MODEL
//   node serve_openai_client.mjs load BASE_URL MODEL CLIENTS REQUESTS
import OpenAI from 'openai';

const [mode, baseURL, model, clientsArg, requestsArg] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 30000 });

async function basic() {
  const out = {};
  const c = await client.completions.create({ model, prompt: 'Hello', max_tokens: 8, temperature: 0 });
  out.completion = { object: c.object, text: c.choices[0].text, finish: c.choices[0].finish_reason, usage: c.usage };

  const chat = await client.chat.completions.create({
    model, max_tokens: 6, temperature: 0,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
  });
  out.chat = { object: chat.object, role: chat.choices[0].message.role, content: chat.choices[0].message.content,
               finish: chat.choices[0].finish_reason, usage: chat.usage };

  const s = await client.completions.create({ model, prompt: 'Hello', max_tokens: 8, temperature: 0, stream: true });
  let text = '', chunks = 0, finish = null;
  for await (const ch of s) { chunks++; text += ch.choices[0].text; finish = ch.choices[0].finish_reason ?? finish; }
  out.stream = { text, chunks, finish };

  const cs = await client.chat.completions.create({
    model, max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
  });
  let content = '', role = null, cfinish = null, usage = null;
  for await (const ch of cs) {
    if (ch.usage) usage = ch.usage;
    if (!ch.choices.length) continue;
    const d = ch.choices[0].delta;
    if (d.role) role = d.role;
    if (d.content) content += d.content;
    cfinish = ch.choices[0].finish_reason ?? cfinish;
  }
  out.chat_stream = { role, content, finish: cfinish, usage };

  out.models = (await client.models.list()).data.map((m) => m.id);

  for (const [name, req] of [['zero_max_tokens', { model, prompt: 'Hi', max_tokens: 0 }],
                             ['unknown_model', { model: 'no-such-model', prompt: 'Hi' }]]) {
    try {
      await client.completions.create(req);
      out[name] = { status: 200 };
    } catch (e) {
      out[name] = { status: e.status, class: e.constructor.name, type: e.type, param: e.param, code: e.code,
                    message: e.error?.message };
    }
  }
  return out;
}

// `clients` workers share `requests` streamed completions; every 4th is dropped after its first chunk.
async function load(clients, requests) {
  let next = 0, done = 0, dropped = 0, failed = 0;
  const errors = [];
  async function worker() {
    while (next < requests) {
      const i = next++;
      try {
        const s = await client.completions.create({ model, prompt: `Request ${i}:`, max_tokens: 12 + (i % 5) * 4,
                                                   temperature: 0.8, seed: i, stream: true });
        let n = 0;
        for await (const ch of s) {
          if (i % 4 === 3 && ++n === 1) { s.controller.abort(); dropped++; break; }
        }
        if (i % 4 !== 3) done++;
      } catch (e) {
        failed++;
        if (errors.length < 3) errors.push(String(e));
      }
    }
  }
  await Promise.all(Array.from({ length: clients }, worker));
  return { done, dropped, failed, errors };
}

const result = mode === 'load' ? await load(Number(clientsArg), Number(requestsArg)) : await basic();
console.log(JSON.stringify(result));
