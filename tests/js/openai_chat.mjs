// The official `openai` SDK's Chat Completions against orgate's legacy adapter: create, stream
// (raw chunks and the chat.completions.stream helper), tools round trip, json_schema, length.
import { client, MODEL, personSchema, runScenarios } from './lib.mjs';

const openai = client();
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
    },
  },
];
const choiceOf = (c) => ({ id: c.id, object: c.object, model: c.model, choice: c.choices[0], usage: c.usage });

await runScenarios({
  async create() {
    return choiceOf(await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello please' }] }));
  },
  async stream_raw() {
    const stream = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Count to three now' }], stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    return {
      text: chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''),
      finish: chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean),
      usage: chunks.at(-1).usage,
      ids: [...new Set(chunks.map((c) => c.id))],
      objects: [...new Set(chunks.map((c) => c.object))],
    };
  },
  async stream_helper() {
    const stream = openai.chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, stream_options: { include_usage: true } });
    const final = await stream.finalChatCompletion();
    return choiceOf(final);
  },
  async tools_round_trip() {
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await openai.chat.completions.create({ model: MODEL, messages, tools });
    const message = first.choices[0].message;
    const call = message.tool_calls[0];
    messages.push(message, { role: 'tool', tool_call_id: call.id, content: 'sunny, 21C' });
    const second = await openai.chat.completions.create({ model: MODEL, messages, tools });
    return { first: choiceOf(first), second: choiceOf(second) };
  },
  async json_schema() {
    const c = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Ada Lovelace, 36' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: personSchema, strict: true } },
    });
    return { ...choiceOf(c), parsed: JSON.parse(c.choices[0].message.content) };
  },
  async length() {
    const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    return choiceOf(await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: words }], max_completion_tokens: 5 }));
  },
});
