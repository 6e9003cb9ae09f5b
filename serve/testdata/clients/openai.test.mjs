// OpenAI's official JavaScript client against POST /v1/responses (and
// the request id every route sends).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { url, model, key, weatherSchema } from './env.mjs';

const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const ask = { model, input: 'Once upon a time', max_output_tokens: 24, temperature: 0 };
const weather = { type: 'function', name: 'get_weather', description: 'The weather of a city', parameters: weatherSchema, strict: false };

test('a response, not streamed', async () => {
  const { data: r, request_id } = await client.responses.create(ask).withResponse();
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].content[0].type, 'output_text');
  assert.ok(r.output_text.length > 0);
  assert.equal(r.output_text, r.output[0].content[0].text);
  assert.ok(r.usage.input_tokens > 5 && r.usage.output_tokens > 0 && r.usage.output_tokens <= 24);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.ok(request_id, 'no x-request-id header');
});

test('a streamed response: its events in order, the same text', async () => {
  const whole = await client.responses.create(ask);
  const types = [];
  let text = '';
  let seq = -1;
  for await (const ev of await client.responses.create({ ...ask, stream: true })) {
    types.push(ev.type);
    assert.equal(ev.sequence_number, seq + 1);
    seq = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.output_text.done') assert.equal(ev.text, text);
  }
  const order = types.filter((t, i) => t !== types[i - 1]).join(' ');
  assert.equal(order, 'response.created response.in_progress response.output_item.added response.content_part.added '
    + 'response.output_text.delta response.output_text.done response.content_part.done response.output_item.done '
    + `response.${whole.status}`);
  assert.equal(text, whole.output_text);
  // the stream helper assembles the same response
  const final = await client.responses.stream(ask).finalResponse();
  assert.equal(final.output_text, whole.output_text);
});

test('max_output_tokens makes an incomplete response', async () => {
  const r = await client.responses.create({ ...ask, max_output_tokens: 2 });
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.usage.output_tokens, 2);
});

test('previous_response_id continues a stored conversation', async () => {
  const first = await client.responses.create({ ...ask, instructions: 'You tell stories.' });
  const next = await client.responses.create({ ...ask, input: 'And then?', previous_response_id: first.id });
  assert.equal(next.previous_response_id, first.id);
  const alone = await client.responses.create({ ...ask, input: 'And then?' });
  // the first turn and its reply are in the prompt
  assert.ok(next.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens,
    `${next.usage.input_tokens} < ${alone.usage.input_tokens} + ${first.usage.output_tokens}`);
  const got = await client.responses.retrieve(first.id);
  assert.equal(got.output_text, first.output_text);
  await assert.rejects(client.responses.create({ ...ask, previous_response_id: 'resp_unknown' }), OpenAI.NotFoundError);
  const unstored = await client.responses.create({ ...ask, store: false });
  await assert.rejects(client.responses.retrieve(unstored.id), OpenAI.NotFoundError);
});

test('a function_call round trip', async () => {
  const first = await client.responses.create({
    ...ask, max_output_tokens: 80, input: 'Weather in Paris?', tools: [weather],
    tool_choice: { type: 'function', name: 'get_weather' },
  });
  const call = first.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');
  const next = await client.responses.create({
    ...ask, previous_response_id: first.id, tools: [weather],
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'Sunny, 21 C' }],
  });
  assert.ok(next.output_text.length > 0);
  // the same turn, sent whole instead of by id
  const whole = await client.responses.create({
    ...ask, tools: [weather],
    input: [
      { role: 'user', content: 'Weather in Paris?' },
      { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: 'Sunny, 21 C' },
    ],
  });
  assert.equal(whole.output_text, next.output_text);
});

test('a streamed function call', async () => {
  const types = [];
  let args = '';
  for await (const ev of await client.responses.create({
    ...ask, max_output_tokens: 80, input: 'Weather in Oslo?', tools: [weather], tool_choice: 'required', stream: true,
  })) {
    types.push(ev.type);
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.completed') {
      const call = ev.response.output.find((o) => o.type === 'function_call');
      assert.equal(call.arguments, args);
    }
  }
  assert.ok(types.includes('response.function_call_arguments.done'));
  assert.equal(typeof JSON.parse(args).city, 'string');
});

test('errors in OpenAI\'s shape; input images need a vision model', async () => {
  await assert.rejects(client.responses.create({ ...ask, model: 'no-such-model' }), OpenAI.NotFoundError);
  await assert.rejects(client.responses.create({ ...ask, temperature: 5 }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.param, 'temperature');
    return true;
  });
  const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  await assert.rejects(client.responses.create({
    ...ask, input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is this?' }, { type: 'input_image', image_url: png }] }],
  }), (err) => err instanceof OpenAI.BadRequestError && /reads no images/.test(err.message));
});

test('chat completions carry a request id too', async () => {
  const { request_id } = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }).withResponse();
  assert.match(request_id, /^req_/);
});
