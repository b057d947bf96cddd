// A request whose structured-output budget orgate spent, sent by each JavaScript client with its
// default retry settings: the `openai` SDK (maxRetries 2) and the Vercel AI SDK (maxRetries 2),
// streaming and not. Each scenario sends ONE request; the test counts what reached the upstream.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, Output, streamText } from 'ai';
import OpenAI from 'openai';
import { API_KEY, BASE_URL, describeError, MODEL, personSchema, runScenarios } from './lib.mjs';

const format = { type: 'json_schema', name: 'person', schema: personSchema, strict: true };
const sdk = () => new OpenAI({ baseURL: BASE_URL, apiKey: API_KEY, timeout: 60_000 }); // default retries
const ai = createOpenAI({ baseURL: BASE_URL, apiKey: API_KEY });
const output = () => Output.object({ schema: jsonSchema(personSchema) });

async function failure(run) {
  try {
    await run();
  } catch (err) {
    return { ...describeError(err), statusCode: err?.statusCode ?? err?.lastError?.statusCode, isRetryable: err?.isRetryable ?? err?.lastError?.isRetryable, reason: err?.reason };
  }
  return { thrown: 'the request did not fail' };
}

await runScenarios({
  async openai_create() {
    return failure(() => sdk().responses.create({ model: MODEL, input: 'Ada Lovelace, 36', text: { format } }));
  },
  async openai_stream() {
    return failure(async () => {
      const stream = await sdk().responses.create({ model: MODEL, input: 'Ada Lovelace, 36', text: { format }, stream: true });
      for await (const _ of stream);
    });
  },
  async ai_generate() {
    return failure(() => generateText({ model: ai.responses(MODEL), prompt: 'Ada Lovelace, 36', output: output() }));
  },
  async ai_stream() {
    return failure(async () => {
      const r = streamText({ model: ai.responses(MODEL), prompt: 'Ada Lovelace, 36', output: output(), onError: () => {} });
      for await (const part of r.fullStream) if (part.type === 'error') throw part.error;
    });
  },
});
