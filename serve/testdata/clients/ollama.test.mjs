// Ollama's official JavaScript client against the /api/* routes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { url, model, key, weatherSchema } from './env.mjs';

const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
const options = { temperature: 0, num_predict: 24 };
const messages = [{ role: 'user', content: 'Once upon a time' }];

test('chat, not streamed and streamed, gives the same reply', async () => {
  const whole = await ollama.chat({ model, messages, options, stream: false, keep_alive: '5m' });
  assert.equal(whole.done, true);
  assert.equal(whole.message.role, 'assistant');
  assert.ok(whole.message.content.length > 0);
  assert.ok(['stop', 'length'].includes(whole.done_reason), whole.done_reason);
  assert.ok(whole.eval_count > 0 && whole.eval_count <= 24);
  assert.ok(whole.prompt_eval_count >= 0);
  assert.ok(whole.total_duration > 0);
  let text = '';
  let parts = 0;
  let last;
  for await (const part of await ollama.chat({ model, messages, options, stream: true })) {
    text += part.message.content;
    parts++;
    last = part;
  }
  assert.ok(parts > 2, `${parts} parts`);
  assert.equal(last.done, true);
  assert.equal(last.done_reason, whole.done_reason);
  assert.equal(text, whole.message.content);
});

test('generate, not streamed and streamed', async () => {
  const whole = await ollama.generate({ model, prompt: 'Once upon a time', system: 'You tell stories.', options, stream: false });
  assert.equal(whole.done, true);
  assert.ok(whole.response.length > 0);
  let text = '';
  for await (const part of await ollama.generate({ model, prompt: 'Once upon a time', system: 'You tell stories.', options, stream: true })) {
    text += part.response;
  }
  assert.equal(text, whole.response);
  const raw = await ollama.generate({ model, prompt: 'Once upon a time', raw: true, options, stream: false });
  assert.ok(raw.response.length > 0);
  assert.notEqual(raw.response, whole.response);
});

test('num_predict ends the reply with done_reason length', async () => {
  const r = await ollama.chat({ model, messages, options: { temperature: 0, num_predict: 3 }, stream: false });
  assert.equal(r.done_reason, 'length');
  assert.equal(r.eval_count, 3);
});

test('list, ps, show and version', async () => {
  const list = await ollama.list();
  assert.deepEqual(list.models.map((m) => m.name), [model]);
  assert.ok(list.models[0].details.family.length > 0);
  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, model);
  const show = await ollama.show({ model });
  assert.ok(show.capabilities.includes('completion'));
  assert.ok(show.capabilities.includes('tools'));
  assert.match(show.template, /im_start/);
  const v = await ollama.version();
  assert.match(v.version, /^\d+\.\d+\.\d+$/);
});

test('format: a JSON schema shapes the reply', async () => {
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 6 } }, required: ['name'] };
  const r = await ollama.chat({ model, messages, format: schema, options: { temperature: 0, num_predict: 40 }, stream: false });
  const v = JSON.parse(r.message.content);
  assert.equal(typeof v.name, 'string');
  const j = await ollama.generate({ model, prompt: 'Once', format: 'json', options: { temperature: 0, num_predict: 40 }, stream: false });
  assert.equal(typeof JSON.parse(j.response), 'object');
});

test('tools reach the template; a call and its result in the history are answered', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather of a city', parameters: weatherSchema } }];
  // stories260K never calls a tool of its own accord: the reply is text,
  // and the tools reach the template
  const r = await ollama.chat({ model, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, options, stream: false });
  assert.equal(r.message.tool_calls, undefined);
  assert.ok(r.message.content.length > 0);
  // a history with a call and its result is accepted and answered
  const after = await ollama.chat({
    model, tools, options, stream: false,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', content: 'Sunny', tool_name: 'get_weather' },
    ],
  });
  assert.ok(after.message.content.length > 0);
});

test('errors in Ollama\'s shape', async () => {
  await assert.rejects(ollama.chat({ model: 'no-such-model', messages, stream: false }), (err) => {
    assert.equal(err.name, 'ResponseError');
    assert.equal(err.status_code, 404);
    assert.match(err.error, /no-such-model/);
    return true;
  });
  await assert.rejects(ollama.chat({ model, messages, options: { temperature: 9 }, stream: false }), (err) => {
    assert.equal(err.status_code, 400);
    assert.match(err.error, /temperature/);
    return true;
  });
  const noKey = new Ollama({ host: url });
  await assert.rejects(noKey.list(), (err) => err.status_code === 401 && /API key/.test(err.error));
});
