// Runs an aotlm ONNX export with ONNX Runtime's CPU provider, following
// the runtime contract of docs/npu.md: the prompt in AR-N prefill passes
// (the last one padded) while they fit the context, then AR-1 passes, the
// whole cache fed back from present.* to past_key_values.*.
//
// usage: node run.mjs JOB.json OUT
// JOB: {"dir": export folder, "tokens": prompt ids, "generate": greedy
// steps after the prompt}
// OUT (JSON): {"logits": one row per prompt token and per generated
// token, "ids": the generated ids}
// or JOB: {"dir": ..., "sequences": [[ids], ...]}, each run from an empty
// cache; OUT: the logits of every token of every sequence, in order, as
// little-endian float32.
import fs from "node:fs";
import path from "node:path";
import ort from "onnxruntime-node";

const [jobFile, outFile] = process.argv.slice(2);
const job = JSON.parse(fs.readFileSync(jobFile, "utf8"));
const cfg = JSON.parse(fs.readFileSync(path.join(job.dir, "genai_config.json"), "utf8"));
const dec = cfg.model.decoder;
const ctx = cfg.model.context_length;
const V = cfg.model.vocab_size;
const stages = Object.fromEntries(dec.pipeline.map((s) => Object.entries(s)[0]));
const N = stages.prefill.ar_length;

const opts = { executionProviders: ["cpu"], graphOptimizationLevel: "disabled" };
const prefill = await ort.InferenceSession.create(path.join(job.dir, stages.prefill.filename), opts);
const decode = await ort.InferenceSession.create(path.join(job.dir, stages.decode.filename), opts);

const layers = dec.num_hidden_layers;
const cacheDims = [1, dec.num_key_value_heads, ctx, dec.head_size];
const cacheSize = cacheDims.reduce((a, b) => a * b, 1);
// an empty cache: float zeros, or the uint8 zero point 128
function emptyCache() {
  if (dec.kv_cache_type === "uint8") {
    return new ort.Tensor("uint8", new Uint8Array(cacheSize).fill(128), cacheDims);
  }
  return new ort.Tensor("float32", new Float32Array(cacheSize), cacheDims);
}
const cache = [];
for (let l = 0; l < layers; l++) cache.push({ k: emptyCache(), v: emptyCache() });

// pass runs rows (real tokens, padded to the session's AR length) at
// position pos and returns the logits of the real rows.
async function pass(sess, ar, rows, pos) {
  const ids = new BigInt64Array(ar);
  const posIds = new BigInt64Array(ar);
  for (let i = 0; i < ar; i++) {
    ids[i] = BigInt(i < rows.length ? rows[i] : 0);
    posIds[i] = BigInt(pos + i);
  }
  const mask = new BigInt64Array(ctx);
  for (let j = 0; j < pos + rows.length; j++) mask[j] = 1n;
  const feeds = {
    [dec.inputs.input_ids]: new ort.Tensor("int64", ids, [1, ar]),
    [dec.inputs.position_ids]: new ort.Tensor("int64", posIds, [1, ar]),
    [dec.inputs.attention_mask]: new ort.Tensor("int64", mask, [1, ctx]),
  };
  for (let l = 0; l < layers; l++) {
    feeds[dec.inputs.past_key_names.replace("%d", l)] = cache[l].k;
    feeds[dec.inputs.past_value_names.replace("%d", l)] = cache[l].v;
  }
  const out = await sess.run(feeds);
  for (let l = 0; l < layers; l++) {
    cache[l].k = out[dec.outputs.present_key_names.replace("%d", l)];
    cache[l].v = out[dec.outputs.present_value_names.replace("%d", l)];
  }
  const logits = out[dec.outputs.logits].data;
  const res = [];
  for (let i = 0; i < rows.length; i++) res.push(Array.from(logits.subarray(i * V, (i + 1) * V)));
  return res;
}

function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

// prompt runs toks from position 0 and returns one logits row a token.
async function prompt(toks) {
  for (let l = 0; l < layers; l++) cache[l] = { k: emptyCache(), v: emptyCache() };
  const logits = [];
  let pos = 0;
  while (pos < toks.length) {
    const left = toks.length - pos;
    if (left > 1 && pos + N <= ctx) {
      const rows = toks.slice(pos, pos + Math.min(N, left));
      logits.push(...(await pass(prefill, N, rows, pos)));
      pos += rows.length;
    } else {
      logits.push(...(await pass(decode, 1, [toks[pos]], pos)));
      pos++;
    }
  }
  return logits;
}

if (job.sequences) {
  const fd = fs.openSync(outFile, "w");
  for (const seq of job.sequences) {
    for (const row of await prompt(seq)) fs.writeSync(fd, new Uint8Array(Float32Array.from(row).buffer));
  }
  fs.closeSync(fd);
} else {
  const logits = await prompt(job.tokens);
  let pos = job.tokens.length;
  const ids = [];
  for (let s = 0; s < (job.generate || 0) && pos < ctx; s++) {
    const id = argmax(logits[logits.length - 1]);
    ids.push(id);
    logits.push(...(await pass(decode, 1, [id], pos)));
    pos++;
  }
  fs.writeFileSync(outFile, JSON.stringify({ logits, ids }));
}
