// The independent reference for tests/data and benchmarks/tokenizer: @huggingface/tokenizers
// (tokenizers.js) over a real tokenizer.json, and @lenml/tokenizers' Jinja for chat templates.
//   node tokenizer_reference.mjs encode MODEL_DIR CORPUS.jsonl OUT.jsonl
//       one JSON string per corpus line → {"ids", "ids_special", "decoded"} per line
//   node tokenizer_reference.mjs bench MODEL_DIR CORPUS.txt ROUNDS   → "ref_seconds <median>"
//   node tokenizer_reference.mjs chat MODEL_DIR CHATS.jsonl OUT.jsonl [TEMPLATE_FILE]
//       one {"messages", "add_generation_prompt"} per line → the rendered prompt (JSON string)
import { createRequire } from "module";
import fs from "fs";
import path from "path";

const [mode, modelDir, input, output, extra] = process.argv.slice(2);
const require = createRequire(path.join(process.cwd(), "noop.js"));
const tokJson = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
// tokenizers.js runs ByteLevel's implied GPT-2 regex as a JavaScript literal whose \s is JS's (it
// includes U+FEFF and misses U+0085, unlike Oniguruma's, which Hugging Face's Rust library uses),
// but translates Split regexes with Oniguruma's meaning. So the same pipeline is spelled as
// Split(GPT-2 regex) + ByteLevel(use_regex: false), which the Rust library runs identically.
const pre = tokJson.pre_tokenizer;
if (pre && pre.type === "ByteLevel" && pre.use_regex !== false) {
  tokJson.pre_tokenizer = { type: "Sequence", pretokenizers: [
    { type: "Split", pattern: { Regex: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+" },
      behavior: "Isolated", invert: false },
    { ...pre, use_regex: false }] };
}
const tokConfig = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));

if (mode === "chat") {
  const { TokenizerLoader } = require("@lenml/tokenizers");
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: tokJson, tokenizerConfig: tokConfig });
  const template = extra ? fs.readFileSync(extra, "utf8") : undefined;
  const out = fs.readFileSync(input, "utf8").split("\n").filter((l) => l.length).map((l) => {
    const c = JSON.parse(l);
    return JSON.stringify(tok.apply_chat_template(c.messages, {
      tokenize: false, add_generation_prompt: c.add_generation_prompt, chat_template: template }));
  });
  fs.writeFileSync(output, out.join("\n") + "\n");
} else {
  const { Tokenizer } = require("@huggingface/tokenizers");
  const tok = new Tokenizer(tokJson, tokConfig);
  if (mode === "encode") {
    const out = fs.readFileSync(input, "utf8").split("\n").filter((l) => l.length).map((l) => {
      const text = JSON.parse(l);
      const ids = tok.encode(text, { add_special_tokens: false }).ids;
      const idsSpecial = tok.encode(text, { add_special_tokens: true }).ids;
      const decoded = ids.length ? tok.decode(ids, { clean_up_tokenization_spaces: false }) : "";
      return JSON.stringify({ ids, ids_special: idsSpecial, decoded });
    });
    fs.writeFileSync(output, out.join("\n") + "\n");
  } else if (mode === "bench") {
    const lines = fs.readFileSync(input, "utf8").split("\n");
    const rounds = Number(output || 3);
    const times = [];
    let tokens = 0;
    for (let r = 0; r <= rounds; ++r) {  // round 0 warms caches and the JIT, as ours is warmed
      const t0 = performance.now();
      tokens = 0;
      for (const l of lines) tokens += tok.encode(l, { add_special_tokens: false }).ids.length;
      if (r > 0) times.push((performance.now() - t0) / 1000);
    }
    times.sort((a, b) => a - b);
    console.log(`ref_seconds ${times[Math.floor(times.length / 2)]} tokens ${tokens}`);
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
}
