// The Vercel AI SDK (`ai` + `@ai-sdk/openai`) against orgate. $API picks the model kind:
// `responses` (openai.responses(model), /v1/responses, every chunk checked with zod) or
// `chat` (openai.chat(model), the /v1/chat/completions adapter). $MODEL picks the model.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, Output, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import { API_KEY, BASE_URL, MODEL, runScenarios } from './lib.mjs';

const provider = createOpenAI({ baseURL: BASE_URL, apiKey: API_KEY });
const API = process.env.API || 'responses';
const model = () => (API === 'chat' ? provider.chat(MODEL) : provider.responses(MODEL));
globalThis.AI_SDK_LOG_WARNINGS = false; // warnings are returned in the results instead

const weather = tool({
  description: 'Get the weather of a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});

const time = tool({
  description: 'Get the local time of a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `noon in ${city}`,
});

const step = (s) => ({
  finishReason: s.finishReason,
  rawFinishReason: s.rawFinishReason,
  text: s.text,
  toolCalls: s.toolCalls.map((c) => ({ toolName: c.toolName, input: c.input, invalid: c.invalid ?? false })),
  toolResults: s.toolResults.map((r) => ({ toolName: r.toolName, output: r.output })),
  reasoning: s.reasoningText ?? null,
  usage: s.usage,
});

await runScenarios({
  async generate_text() {
    const r = await generateText({ model: model(), prompt: 'Hello from the AI SDK', maxRetries: 0 });
    return { ...step(r), responseId: r.response.id, modelId: r.response.modelId, totalUsage: r.totalUsage, warnings: r.warnings, providerMetadata: r.providerMetadata };
  },
  async stream_text() {
    const r = streamText({ model: model(), system: 'Be brief.', prompt: 'Stream this text please', maxRetries: 0 });
    const parts = [];
    const deltas = [];
    for await (const part of r.fullStream) {
      parts.push(part.type);
      if (part.type === 'text-delta') deltas.push(part.text);
      if (part.type === 'error') parts.push(`error: ${String(part.error?.message ?? part.error)}`);
    }
    return { parts, deltas, text: await r.text, finishReason: await r.finishReason, usage: await r.usage, providerMetadata: await r.providerMetadata };
  },
  async tools_multi_step() {
    const r = await generateText({
      model: model(),
      prompt: 'What is the weather in Paris?',
      tools: { weather },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    });
    return { steps: r.steps.map(step), text: r.text, finishReason: r.finishReason, totalUsage: r.totalUsage };
  },
  async stream_tools_multi_step() {
    const r = streamText({ model: model(), prompt: 'What is the weather in Paris?', tools: { weather }, stopWhen: stepCountIs(3), maxRetries: 0 });
    const parts = [];
    for await (const part of r.fullStream) {
      parts.push(part.type);
      if (part.type === 'error') parts.push(`error: ${String(part.error?.message ?? part.error)}`);
    }
    return { parts, steps: (await r.steps).map(step), text: await r.text, finishReason: await r.finishReason };
  },
  async parallel_tools() {
    const prompt = 'Weather and time in Paris, in parallel';
    const r = await generateText({ model: model(), prompt, tools: { weather, time }, stopWhen: stepCountIs(3), maxRetries: 0 });
    const s = streamText({ model: model(), prompt, tools: { weather, time }, stopWhen: stepCountIs(3), maxRetries: 0 });
    const errors = [];
    for await (const part of s.fullStream) if (part.type === 'error') errors.push(String(part.error?.message ?? part.error));
    return { steps: r.steps.map(step), streamed: { errors, steps: (await s.steps).map(step) } };
  },
  async output_object() {
    const schema = z.object({ name: z.string(), age: z.number().int() });
    const r = await generateText({ model: model(), prompt: 'Ada Lovelace, 36', output: Output.object({ schema }), maxRetries: 0 });
    return { output: r.output, finishReason: r.finishReason, usage: r.usage };
  },
  async stream_output_object() {
    const schema = z.object({ name: z.string(), age: z.number().int() });
    const r = streamText({ model: model(), prompt: 'Ada Lovelace, 36', output: Output.object({ schema }), maxRetries: 0 });
    const partials = [];
    for await (const partial of r.partialOutputStream) partials.push(partial);
    return { output: await r.output, partials: partials.length, finishReason: await r.finishReason };
  },
  async max_output_tokens() {
    const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    const r = await generateText({ model: model(), prompt: words, maxOutputTokens: 16, maxRetries: 0 });
    const s = streamText({ model: model(), prompt: words, maxOutputTokens: 16, maxRetries: 0 });
    await s.consumeStream();
    return { ...step(r), streamed: { finishReason: await s.finishReason, rawFinishReason: await s.rawFinishReason, usage: await s.usage } };
  },
  async reasoning() {
    const r = await generateText({ model: model(), prompt: 'Please think orgate:reason about it', maxRetries: 0 });
    const s = streamText({ model: model(), prompt: 'Please think orgate:reason about it', maxRetries: 0 });
    const parts = [];
    for await (const part of s.fullStream) {
      parts.push(part.type);
      if (part.type === 'error') parts.push(`error: ${String(part.error?.message ?? part.error)}`);
    }
    return {
      ...step(r),
      reasoningParts: r.reasoning.map((p) => ({ type: p.type, text: p.text, providerMetadata: p.providerMetadata })),
      streamed: { parts, reasoning: await s.reasoningText, text: await s.text, usage: await s.usage },
    };
  },
  async reasoning_tools_stateless() {
    // store: false makes the SDK resend reasoning items whole (encrypted_content) instead of
    // item references; a reasoning model calling a tool, then answering.
    const options = { openai: { store: false, reasoningSummary: 'auto' } };
    const prompt = 'Please think orgate:reason about the weather in Paris';
    const r = await generateText({ model: model(), prompt, tools: { weather }, stopWhen: stepCountIs(3), providerOptions: options, maxRetries: 0 });
    const s = streamText({ model: model(), prompt, tools: { weather }, stopWhen: stepCountIs(3), providerOptions: options, maxRetries: 0 });
    const parts = [];
    for await (const part of s.fullStream) if (part.type === 'error') parts.push(`error: ${String(part.error?.message ?? part.error)}`);
    return { steps: r.steps.map(step), text: r.text, streamed: { errors: parts, steps: (await s.steps).map(step) } };
  },
  async reasoning_tools_stored() {
    const prompt = 'Please think orgate:reason about the weather in Paris';
    const r = await generateText({ model: model(), prompt, tools: { weather }, stopWhen: stepCountIs(3), maxRetries: 0 });
    return { steps: r.steps.map(step), text: r.text };
  },
  async tool_choice() {
    const required = await generateText({ model: model(), prompt: 'Hello there', tools: { weather }, toolChoice: 'required', maxRetries: 0 });
    const named = await generateText({ model: model(), prompt: 'Hello there', tools: { weather }, toolChoice: { type: 'tool', toolName: 'weather' }, maxRetries: 0 });
    const none = await generateText({ model: model(), prompt: 'Hello there', tools: { weather }, toolChoice: 'none', maxRetries: 0 });
    return { required: step(required), named: step(named), none: step(none) };
  },
  async provider_options() {
    // What apps pass through providerOptions.openai: each must be honoured or refused loudly.
    const out = {};
    const tries = {
      previousResponseId: null, // filled below
      reasoningEffort: 'low',
      textVerbosity: 'medium',
      metadata: { app: 'js-test' },
      user: 'user-123',
      parallelToolCalls: false,
      serviceTier: 'flex',
      promptCacheKey: 'cache-key-1',
      safetyIdentifier: 'safety-1',
      maxToolCalls: 3,
      logprobs: 2,
      instructions: 'Be brief.',
      truncation: 'auto',
    };
    const first = await generateText({ model: model(), prompt: 'Remember the word banana', maxRetries: 0 });
    tries.previousResponseId = first.providerMetadata?.openai?.responseId ?? null;
    for (const [key, value] of Object.entries(tries)) {
      try {
        const r = await generateText({ model: model(), prompt: 'Say something please', providerOptions: { openai: { [key]: value } }, maxRetries: 0 });
        out[key] = { ok: true, text: r.text, warnings: r.warnings, finishReason: r.finishReason, logprobs: r.providerMetadata?.openai?.logprobs ?? null };
      } catch (err) {
        out[key] = { ok: false, statusCode: err.statusCode, message: err.message };
      }
    }
    return out;
  },
  async image_input() {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const r = await generateText({
      model: model(),
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this image?' }, { type: 'image', image: png, mediaType: 'image/png' }] }],
      maxRetries: 0,
    });
    return { text: r.text, finishReason: r.finishReason };
  },
  async errors() {
    const out = {};
    for (const [name, prompt] of [['fail', 'orgate:fail now'], ['rate_limit', 'orgate:rate-limit now']]) {
      try {
        await generateText({ model: provider.responses('orgate/echo'), prompt, maxRetries: 0 });
        out[name] = 'no error';
      } catch (err) {
        out[name] = { name: err.name, message: err.message, statusCode: err.statusCode, isRetryable: err.isRetryable };
      }
    }
    const s = streamText({ model: model(), prompt: 'orgate:fail-mid one two three four five six', maxRetries: 0, onError: () => {} });
    const parts = [];
    for await (const part of s.fullStream) {
      parts.push(part.type === 'error' ? `error: ${String(part.error?.message ?? part.error)}` : part.type);
    }
    out.fail_mid = { parts, finishReason: await s.finishReason };
    return out;
  },
});
