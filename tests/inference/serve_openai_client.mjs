// Drives ds-serve with the official `openai` npm client (installed by serve_npm_setup.sh) and
// prints one JSON object with what it saw; tests/inference/serve_http_test.cpp checks it.
//   node serve_openai_client.mjs basic BASE_URL MODEL
//   node serve_openai_client.mjs fields BASE_URL MODEL     (n, logprobs, echo, stop, penalties)
//   node serve_openai_client.mjs best_of BASE_URL MODEL
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

async function status(req, chat = false) {
  try {
    await (chat ? client.chat.completions.create(req) : client.completions.create(req));
    return { status: 200 };
  } catch (e) {
    return { status: e.status, class: e.constructor.name, param: e.param, code: e.code };
  }
}

// Streams a completion; the text, finish_reason and chunk count of each choice index.
async function streamed(req, chat = false) {
  const s = await (chat ? client.chat.completions.create({ ...req, stream: true })
                        : client.completions.create({ ...req, stream: true }));
  const by = {};
  let order = [];
  for await (const ch of s) {
    for (const c of ch.choices) {
      const o = (by[c.index] ??= { text: '', finish: null, chunks: 0, logprobs: 0 });
      o.text += chat ? (c.delta.content ?? '') : c.text;
      o.finish = c.finish_reason ?? o.finish;
      o.chunks++;
      o.logprobs += chat ? (c.logprobs?.content?.length ?? 0) : (c.logprobs?.tokens?.length ?? 0);
      order.push(c.index);
    }
  }
  return { choices: by, order };
}

async function fields() {
  const out = {};
  const base = { model, prompt: 'The quick', max_tokens: 40, temperature: 0 };
  const plain = await client.completions.create(base);
  out.plain = { text: plain.choices[0].text, usage: plain.usage };

  // n: greedy choices are equal; seeded sampled choices reproduce.
  const two = await client.completions.create({ ...base, n: 2, max_tokens: 8 });
  out.n_greedy = { texts: two.choices.map((c) => c.text), indexes: two.choices.map((c) => c.index), usage: two.usage };
  const sampled = { ...base, n: 3, max_tokens: 12, temperature: 1.0, seed: 11 };
  out.n_seeded = [(await client.completions.create(sampled)).choices.map((c) => c.text),
                  (await client.completions.create(sampled)).choices.map((c) => c.text)];
  out.n_stream = await streamed({ ...base, n: 2, max_tokens: 8 });
  const chat = await client.chat.completions.create({ model, max_tokens: 6, temperature: 0, n: 2,
                                                     messages: [{ role: 'user', content: 'Hi' }] });
  out.chat_n = chat.choices.map((c) => ({ index: c.index, content: c.message.content, finish: c.finish_reason }));

  // logprobs.
  const lp = await client.completions.create({ ...base, max_tokens: 6, logprobs: 3 });
  out.logprobs = { text: lp.choices[0].text, logprobs: lp.choices[0].logprobs, usage: lp.usage };
  const clp = await client.chat.completions.create({ model, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2,
                                                    messages: [{ role: 'user', content: 'Hi' }] });
  out.chat_logprobs = { content: clp.choices[0].logprobs.content, usage: clp.usage };
  out.logprobs_stream = await streamed({ ...base, max_tokens: 6, logprobs: 2 });

  // echo.
  const echo = await client.completions.create({ ...base, echo: true });
  out.echo = { text: echo.choices[0].text, usage: echo.usage };
  out.echo_with_logprobs = await status({ ...base, echo: true, logprobs: 1 });

  // stop: a string from the greedy text of the same prompt (found by the caller's choice below).
  const text = out.plain.text;
  const at = text.slice(1).search(/[\x20-\x7e]{3}/) + 1;
  out.stop_string = at > 0 ? text.slice(at, at + 3) : null;
  if (out.stop_string) {
    const req = { ...base, stop: ['\u0001never', out.stop_string] };
    const st = await client.completions.create(req);
    out.stop = { text: st.choices[0].text, finish: st.choices[0].finish_reason, usage: st.usage };
    out.stop_stream = await streamed(req);
  }

  // penalties and type errors.
  out.penalties = await status({ ...base, presence_penalty: 1.5, frequency_penalty: -0.5 });
  out.bad_penalty = await status({ ...base, presence_penalty: 2.5 });
  out.bad_n = await status({ ...base, n: 0 });
  out.bad_logprobs = await status({ ...base, logprobs: 6 });
  out.bad_top_logprobs = await status({ model, messages: [{ role: 'user', content: 'Hi' }], top_logprobs: 3 }, true);
  return out;
}

// best_of: the candidates are what n gives with the same seed (candidate i draws from seed + i), here
// fetched with their token logprobs so the caller can rank them; then the best_of answers and refusals.
async function bestOf() {
  const out = {};
  const base = { model, prompt: 'The quick', max_tokens: 10, temperature: 1.0, seed: 5 };
  const all = await client.completions.create({ ...base, n: 4, logprobs: 0 });
  out.candidates = all.choices.map((c) => ({ text: c.text, token_logprobs: c.logprobs.token_logprobs }));
  out.candidates_usage = all.usage;
  const best = await client.completions.create({ ...base, n: 2, best_of: 4 });
  out.best = { texts: best.choices.map((c) => c.text), indexes: best.choices.map((c) => c.index),
               logprobs: best.choices.map((c) => c.logprobs ?? null), usage: best.usage };
  const withLogprobs = await client.completions.create({ ...base, best_of: 4, logprobs: 1 });
  out.best_with_logprobs = { text: withLogprobs.choices[0].text, logprobs: withLogprobs.choices[0].logprobs };
  out.below_n = await status({ ...base, n: 3, best_of: 2 });
  out.too_many = await status({ ...base, best_of: 21 });
  out.streamed = await status({ ...base, best_of: 2, stream: true });
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

const result = mode === 'load' ? await load(Number(clientsArg), Number(requestsArg))
             : mode === 'fields' ? await fields() : mode === 'best_of' ? await bestOf() : await basic();
console.log(JSON.stringify(result));
