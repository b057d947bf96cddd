// Shared by the scenario scripts: the server from the environment, and a runner that records
// each scenario's result (or its error) and prints them all as one JSON object.
import OpenAI from 'openai';

export const BASE_URL = process.env.ORGATE_BASE_URL;
export const API_KEY = process.env.ORGATE_API_KEY;
export const MODEL = process.env.MODEL || 'orgate/echo';
if (!BASE_URL || !API_KEY) {
  console.error('ORGATE_BASE_URL and ORGATE_API_KEY must be set');
  process.exit(2);
}

export function client(options = {}) {
  return new OpenAI({ baseURL: BASE_URL, apiKey: API_KEY, maxRetries: 0, timeout: 20_000, ...options });
}

export const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the weather of a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

export const personSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' } },
  required: ['name', 'age'],
  additionalProperties: false,
};

// An error as the SDK surfaces it: class, status, and the fields an app reads.
export function describeError(err) {
  const out = { class: err?.constructor?.name, message: String(err?.message ?? err) };
  for (const key of ['status', 'code', 'param', 'type', 'requestID']) {
    if (err?.[key] !== undefined) out[key] = err[key];
  }
  if (err?.error !== undefined && typeof err.error === 'object') out.error = err.error;
  if (err?.headers?.get) out.retryAfter = err.headers.get('retry-after');
  if (err?.cause) out.cause = String(err.cause?.message ?? err.cause);
  return out;
}

// Run the named scenarios (all, or those in $SCENARIOS, comma-separated) one after the other;
// print {name: result} or {name: {thrown: ...}} as JSON. Exit 1 only if printing itself fails.
export async function runScenarios(scenarios) {
  const only = process.env.SCENARIOS ? process.env.SCENARIOS.split(',') : Object.keys(scenarios);
  const results = {};
  for (const name of only) {
    if (!scenarios[name]) {
      console.error(`unknown scenario ${name}`);
      process.exit(2);
    }
    try {
      results[name] = await scenarios[name]();
    } catch (err) {
      results[name] = { thrown: describeError(err), stack: String(err?.stack ?? '').split('\n').slice(0, 6).join('\n') };
    }
  }
  process.stdout.write(JSON.stringify(results, null, 1) + '\n');
}
