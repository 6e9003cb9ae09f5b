// OpenAI's and Ollama's official JavaScript clients against the
// embedding routes of a server on an embedding model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { key } from './env.mjs';

const url = process.env.AOTLM_EMBED_URL;
const model = process.env.AOTLM_EMBED_MODEL;
// the embedding of `text`, as Session.Embed gives it
const want = JSON.parse(process.env.AOTLM_EMBED_WANT ?? 'null');
if (!url || !model || !want) {
  throw new Error('AOTLM_EMBED_URL, AOTLM_EMBED_MODEL and AOTLM_EMBED_WANT must name the embedding server under test');
}
const text = 'Once upon a time';

const close = (got, what) => {
  assert.equal(got.length, want.length, `${what}: ${got.length} values`);
  for (let i = 0; i < want.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) <= 1e-6, `${what}: value ${i} is ${got[i]}, want ${want[i]}`);
  }
};

test('openai embeddings.create, base64 (the client default) and float', async () => {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
  const r = await client.embeddings.create({ model, input: [text, 'The cat sat.'] });
  assert.equal(r.object, 'list');
  assert.equal(r.data.length, 2);
  assert.deepEqual(r.data.map((d) => d.index), [0, 1]);
  close(r.data[0].embedding, 'base64');
  assert.ok(r.usage.prompt_tokens > 2);
  const f = await client.embeddings.create({ model, input: text, encoding_format: 'float' });
  close(f.data[0].embedding, 'float');
});

test('ollama embed and embeddings', async () => {
  const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
  const r = await ollama.embed({ model, input: [text, 'The cat sat.'] });
  assert.equal(r.embeddings.length, 2);
  close(r.embeddings[0], 'embed');
  assert.ok(r.prompt_eval_count > 2);
  const one = await ollama.embeddings({ model, prompt: text });
  close(one.embedding, 'embeddings');
});
