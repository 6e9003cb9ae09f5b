// The three official clients on a server whose template opens the
// model's thinking (AOTLM_THINK_URL): the thinking comes apart from the
// answer in each API's own form, streamed and not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { model, key } from './env.mjs';

const url = process.env.AOTLM_THINK_URL;
if (!url) throw new Error('AOTLM_THINK_URL must name the server with the thinking template');
const anthropic = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const messages = [{ role: 'user', content: 'Once upon a time' }];

test('Messages: a thinking block, streamed and not, then the answer after the budget', async () => {
  const ask = { model, max_tokens: 24, temperature: 0, messages, thinking: { type: 'enabled', budget_tokens: 6 } };
  const msg = await anthropic.messages.create(ask);
  assert.deepEqual(msg.content.map((b) => b.type), ['thinking', 'text']);
  assert.ok(msg.content[0].thinking.length > 0);
  assert.ok(msg.content[1].text.length > 0);
  assert.doesNotMatch(msg.content[1].text, /think>/);
  const streamed = await anthropic.messages.stream(ask).finalMessage();
  assert.deepEqual(streamed.content.map((b) => b.type), ['thinking', 'text']);
  assert.equal(streamed.content[0].thinking, msg.content[0].thinking);
  assert.equal(streamed.content[1].text, msg.content[1].text);
  // without thinking asked for, the answer comes at once
  const plain = await anthropic.messages.create({ model, max_tokens: 24, temperature: 0, messages });
  assert.deepEqual(plain.content.map((b) => b.type), ['text']);
});

test('Ollama: thinking, streamed and not; think false switches it off', async () => {
  const options = { temperature: 0, num_predict: 16 };
  const r = await ollama.chat({ model, messages, think: true, options, stream: false });
  assert.ok(r.message.thinking.length > 0);
  let thinking = '';
  for await (const part of await ollama.chat({ model, messages, think: true, options, stream: true })) {
    thinking += part.message.thinking ?? '';
  }
  assert.equal(thinking, r.message.thinking);
  const off = await ollama.chat({ model, messages, think: false, options, stream: false });
  assert.equal(off.message.thinking, undefined);
  assert.ok(off.message.content.length > 0);
});

test('OpenAI: reasoning_content in chat completions, a reasoning item in Responses', async () => {
  const chat = await openai.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
  assert.ok(chat.choices[0].message.reasoning_content.length > 0);
  const r = await openai.responses.create({ model, input: 'Once upon a time', max_output_tokens: 16, temperature: 0, reasoning: { effort: 'high' } });
  assert.equal(r.output[0].type, 'reasoning');
  assert.equal(r.output[0].content[0].text, chat.choices[0].message.reasoning_content);
  const types = [];
  for await (const ev of await openai.responses.create({ model, input: 'Once upon a time', max_output_tokens: 16, temperature: 0, stream: true })) {
    types.push(ev.type);
  }
  assert.ok(types.includes('response.reasoning_text.delta'), types.join(' '));
  const off = await openai.responses.create({ model, input: 'Once upon a time', max_output_tokens: 16, temperature: 0, reasoning: { effort: 'none' } });
  assert.deepEqual(off.output.map((o) => o.type), ['message']);
});
