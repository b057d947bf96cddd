// The official `openai` SDK's Responses API against orgate: create (text, arrays, instructions,
// multi-turn, tools round trip, json_schema, max_output_tokens), streams (helpers and raw),
// stored responses (retrieve, input items, previous_response_id, delete). $MODEL picks the model.
import { zodResponsesFunction, zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { client, MODEL, weatherTool, personSchema, runScenarios } from './lib.mjs';

const openai = client();

const summary = (r) => ({
  id: r.id,
  object: r.object,
  status: r.status,
  model: r.model,
  output_text: r.output_text,
  output_types: r.output.map((i) => i.type),
  incomplete_details: r.incomplete_details,
  usage: r.usage,
  error: r.error,
});

await runScenarios({
  async text() {
    return summary(await openai.responses.create({ model: MODEL, input: 'Hello there, gateway!' }));
  },
  async array_input_instructions() {
    const r = await openai.responses.create({
      model: MODEL,
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: 'First question' },
        { role: 'assistant', content: 'First answer' },
        { role: 'user', content: [{ type: 'input_text', text: 'Second question please' }] },
      ],
    });
    return { ...summary(r), instructions: r.instructions };
  },
  async tools_round_trip() {
    const first = await openai.responses.create({ model: MODEL, input: 'What is the weather in Paris?', tools: [weatherTool] });
    const call = first.output.find((i) => i.type === 'function_call');
    if (!call) throw new Error(`no function_call in ${JSON.stringify(first.output)}`);
    const input = [
      { role: 'user', content: 'What is the weather in Paris?' },
      ...first.output,
      { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21C' },
    ];
    const second = await openai.responses.create({ model: MODEL, input, tools: [weatherTool], store: false });
    return { first: summary(first), call: { name: call.name, arguments: JSON.parse(call.arguments), status: call.status }, second: summary(second) };
  },
  async json_schema() {
    const r = await openai.responses.create({
      model: MODEL,
      input: 'Ada Lovelace, 36',
      text: { format: { type: 'json_schema', name: 'person', schema: personSchema, strict: true } },
    });
    return { ...summary(r), parsed: JSON.parse(r.output_text), format: r.text?.format };
  },
  async parse_helpers() {
    const Person = z.object({ name: z.string(), age: z.number().int() });
    const parsed = await openai.responses.parse({ model: MODEL, input: 'Ada Lovelace, 36', text: { format: zodTextFormat(Person, 'person') } });
    const tool = zodResponsesFunction({ name: 'get_weather', parameters: z.object({ city: z.string() }) });
    const call = await openai.responses.parse({ model: MODEL, input: 'Weather in Paris?', tools: [tool] });
    const stream = openai.responses.stream({ model: MODEL, input: 'Ada Lovelace, 36', text: { format: zodTextFormat(Person, 'person') } });
    const streamed = await stream.finalResponse();
    return {
      output_parsed: parsed.output_parsed,
      parsed_arguments: call.output.find((i) => i.type === 'function_call')?.parsed_arguments,
      streamed_parsed: streamed.output_parsed,
    };
  },
  async max_output_tokens() {
    const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    return summary(await openai.responses.create({ model: MODEL, input: words, max_output_tokens: 16 }));
  },
  async stream_helpers() {
    const deltas = [];
    const types = [];
    const stream = openai.responses.stream({ model: MODEL, input: 'Stream me word by word' });
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    return { deltas, types, final: summary(final) };
  },
  async stream_tools() {
    const argDeltas = [];
    const stream = openai.responses.stream({ model: MODEL, input: 'Weather in Paris?', tools: [weatherTool] });
    stream.on('response.function_call_arguments.delta', (e) => argDeltas.push(e.delta));
    let done = null;
    stream.on('response.function_call_arguments.done', (e) => (done = e.arguments));
    const final = await stream.finalResponse();
    const call = final.output.find((i) => i.type === 'function_call');
    return { joined: argDeltas.join(''), done, call, final: summary(final) };
  },
  async stream_raw() {
    const stream = await openai.responses.create({ model: MODEL, input: 'Raw stream please', stream: true });
    const types = [];
    const seq = [];
    let text = '';
    let last = null;
    for await (const event of stream) {
      types.push(event.type);
      seq.push(event.sequence_number);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.response) last = event.response;
    }
    return { types, seq, text, final: summary(last) };
  },
  async stream_reasoning_tools() {
    const types = [];
    const stream = openai.responses.stream({ model: MODEL, input: 'Please think orgate:reason about the weather in Paris', tools: [weatherTool], store: false, include: ['reasoning.encrypted_content'] });
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    const reasoning = final.output.find((i) => i.type === 'reasoning');
    const call = final.output.find((i) => i.type === 'function_call');
    const second = await openai.responses.create({
      model: MODEL,
      store: false,
      tools: [weatherTool],
      input: [
        { role: 'user', content: 'Please think orgate:reason about the weather in Paris' },
        ...final.output,
        { type: 'function_call_output', call_id: call.call_id, output: 'rainy, 12C' },
      ],
    });
    return { types, final: summary(final), reasoning, second: summary(second) };
  },
  async stream_incomplete() {
    const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    const stream = openai.responses.stream({ model: MODEL, input: words, max_output_tokens: 16 });
    const types = [];
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    return { types: [...new Set(types)], final: summary(final) };
  },
  async stream_refusal() {
    const stream = openai.responses.stream({ model: MODEL, input: 'orgate:refuse this one' });
    const deltas = [];
    stream.on('response.refusal.delta', (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    return { deltas, content: final.output[0]?.content, final: summary(final) };
  },
  async replay_stream() {
    const stream = openai.responses.stream({ model: MODEL, input: 'Replay me later please' });
    const first = await stream.finalResponse();
    const replay = openai.responses.stream({ response_id: first.id });
    const types = [];
    replay.on('event', (e) => types.push(e.type));
    const again = await replay.finalResponse();
    const resumed = openai.responses.stream({ response_id: first.id, starting_after: 3 });
    const resumedTypes = [];
    resumed.on('event', (e) => resumedTypes.push(e.sequence_number));
    await resumed.finalResponse();
    return { first: summary(first), again: summary(again), types, resumedTypes };
  },
  async background() {
    const started = await openai.responses.create({ model: MODEL, input: 'Run in the background orgate:delay=20', background: true });
    let r = started;
    const statuses = [started.status];
    for (let i = 0; i < 100 && ['queued', 'in_progress'].includes(r.status); i++) {
      await new Promise((ok) => setTimeout(ok, 50));
      r = await openai.responses.retrieve(started.id);
      statuses.push(r.status);
    }
    const slow = await openai.responses.create({ model: MODEL, input: 'Cancel me orgate:delay=500 a b c d e f g h', background: true });
    const cancelled = await openai.responses.cancel(slow.id);
    return { statuses: [...new Set(statuses)], final: summary(r), cancelled: cancelled.status };
  },
  async stored() {
    const first = await openai.responses.create({ model: MODEL, input: 'Remember the word banana' });
    const got = await openai.responses.retrieve(first.id);
    const items = [];
    for await (const item of openai.responses.inputItems.list(first.id)) items.push(item);
    const second = await openai.responses.create({ model: MODEL, input: 'What word?', previous_response_id: first.id });
    const deleted = await openai.responses.delete(first.id);
    let after = null;
    try {
      await openai.responses.retrieve(first.id);
    } catch (err) {
      after = { status: err.status, class: err.constructor.name, code: err.code };
    }
    return {
      first: summary(first),
      retrieved: summary(got),
      items: items.map((i) => ({ type: i.type, role: i.role, id: i.id })),
      second: { ...summary(second), previous_response_id: second.previous_response_id },
      deleted: deleted ?? null,
      after,
    };
  },
});
