// Anthropic's official TypeScript client against POST /v1/messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { url, model, key, weatherSchema } from './env.mjs';

const client = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
const ask = { model, max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: 'Once upon a time' }] };
const weather = { name: 'get_weather', description: 'The weather of a city', input_schema: weatherSchema };

test('a message, not streamed', async () => {
  const { data: msg, request_id } = await client.messages.create(ask).withResponse();
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.model, model);
  assert.equal(msg.content.length, 1);
  assert.equal(msg.content[0].type, 'text');
  assert.ok(msg.content[0].text.length > 0, 'empty text');
  assert.ok(['end_turn', 'max_tokens'].includes(msg.stop_reason), msg.stop_reason);
  assert.ok(msg.usage.input_tokens + msg.usage.cache_read_input_tokens > 5);
  assert.ok(msg.usage.output_tokens > 0 && msg.usage.output_tokens <= 24);
  assert.ok(request_id, 'no request-id header');
});

test('a streamed message: Anthropic\'s event order, the same text', async () => {
  const whole = await client.messages.create(ask);
  const stream = await client.messages.create({ ...ask, stream: true });
  const types = [];
  let text = '';
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta') {
      assert.equal(ev.delta.type, 'text_delta');
      text += ev.delta.text;
    }
  }
  // (the client drops ping events; the Go tests check them on the wire)
  assert.match(types.join(' '),
    /^message_start content_block_start (content_block_delta )+content_block_stop message_delta message_stop$/);
  assert.equal(text, whole.content[0].text);
  // the stream helper assembles the same message
  const final = await client.messages.stream(ask).finalMessage();
  assert.equal(final.content[0].text, whole.content[0].text);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
});

test('stop_sequences and max_tokens end the reply as Anthropic names it', async () => {
  const short = await client.messages.create({ ...ask, max_tokens: 2 });
  assert.equal(short.stop_reason, 'max_tokens');
  assert.equal(short.usage.output_tokens, 2);
  const whole = await client.messages.create(ask);
  const words = whole.content[0].text.split(/\s+/).filter((w) => w.length > 2);
  assert.ok(words.length >= 3, whole.content[0].text);
  const stop = words[Math.floor(words.length / 2)];
  const cut = await client.messages.create({ ...ask, stop_sequences: ['never in the text', stop] });
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  assert.equal(cut.content[0].text, whole.content[0].text.slice(0, whole.content[0].text.indexOf(stop)));
});

test('a tool_use round trip', async () => {
  const first = await client.messages.create({
    ...ask, max_tokens: 80, tools: [weather], tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
  });
  assert.equal(first.stop_reason, 'tool_use');
  const use = first.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(first.content));
  assert.equal(use.name, 'get_weather');
  assert.match(use.id, /^toolu_/);
  assert.equal(typeof use.input.city, 'string');
  const second = await client.messages.create({
    ...ask, tools: [weather],
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 C' }] },
    ],
  });
  assert.ok(['end_turn', 'max_tokens'].includes(second.stop_reason), second.stop_reason);
  assert.ok(second.content.some((b) => b.type === 'text'));
  // the tool result reached the prompt
  const n1 = await client.messages.countTokens({ model, messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  assert.ok(second.usage.input_tokens + second.usage.cache_read_input_tokens > n1.input_tokens + 10);
});

test('a streamed tool call arrives as input_json_delta', async () => {
  const stream = client.messages.stream({
    ...ask, max_tokens: 80, tools: [weather], tool_choice: { type: 'any' },
    messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  });
  const deltas = [];
  stream.on('streamEvent', (ev) => { if (ev.type === 'content_block_delta') deltas.push(ev.delta.type); });
  const msg = await stream.finalMessage();
  assert.equal(msg.stop_reason, 'tool_use');
  const use = msg.content.find((b) => b.type === 'tool_use');
  assert.ok(use);
  assert.equal(typeof use.input.city, 'string');
  assert.ok(deltas.includes('input_json_delta'));
});

test('count_tokens counts the prompt a message is given', async () => {
  const counted = await client.messages.countTokens({ model, system: 'You tell stories.', messages: ask.messages });
  const msg = await client.messages.create({ ...ask, system: 'You tell stories.' });
  assert.equal(counted.input_tokens, msg.usage.input_tokens + msg.usage.cache_read_input_tokens);
  const bare = await client.messages.countTokens({ model, messages: ask.messages });
  assert.ok(counted.input_tokens > bare.input_tokens);
});

test('errors in Anthropic\'s shape and classes', async () => {
  await assert.rejects(client.messages.create({ ...ask, model: 'no-such-model' }), (err) => {
    assert.ok(err instanceof Anthropic.NotFoundError, err.constructor.name);
    assert.equal(err.error.type, 'error');
    assert.equal(err.error.error.type, 'not_found_error');
    assert.match(err.error.error.message, /no-such-model/);
    return true;
  });
  await assert.rejects(client.messages.create({ ...ask, messages: [] }), Anthropic.BadRequestError);
  await assert.rejects(client.messages.create({ ...ask, temperature: 7 }), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.equal(err.error.error.type, 'invalid_request_error');
    assert.match(err.error.error.message, /temperature/);
    return true;
  });
  const wrongKey = new Anthropic({ baseURL: url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrongKey.messages.create(ask), Anthropic.AuthenticationError);
});
