// The official `openai` SDK's error classes, status codes and retries against orgate, and
// models.list(). Retries: the SDK must honour Retry-After on 429 without hanging or hammering.
import OpenAI from 'openai';
import { BASE_URL, client, describeError, MODEL, runScenarios } from './lib.mjs';

async function failure(promise) {
  try {
    await promise;
  } catch (err) {
    return describeError(err);
  }
  throw new Error('the request did not fail');
}

// Count the SDK's attempts (1 + maxRetries) and the time they take.
async function retried(model, input, stream, maxRetries) {
  let requests = 0;
  const counting = async (url, init) => {
    requests += 1;
    return fetch(url, init);
  };
  const retrying = client({ maxRetries, fetch: counting });
  const started = Date.now();
  const err = await failure(
    retrying.responses.create({ model, input, stream }).then(async (r) => {
      if (stream) for await (const _ of r);
    }),
  );
  return { ...err, requests, seconds: (Date.now() - started) / 1000 };
}

await runScenarios({
  async unauthorized() {
    const bad = new OpenAI({ baseURL: BASE_URL, apiKey: 'not-the-key', maxRetries: 0 });
    return failure(bad.responses.create({ model: MODEL, input: 'hi' }));
  },
  async model_not_found() {
    return failure(client().responses.create({ model: 'no-such-model', input: 'hi' }));
  },
  async bad_param() {
    return failure(client().responses.create({ model: MODEL, input: 'hi', temperature: 7 }));
  },
  async unknown_param() {
    return failure(client().responses.create({ model: MODEL, input: 'hi', bogus_field: 1 }));
  },
  async not_found_response() {
    return failure(client().responses.retrieve('resp_doesnotexist'));
  },
  async rate_limit_retries() {
    // orgate/echo answers `orgate:rate-limit` with 429 and Retry-After: 1; maxRetries 2.
    return retried('orgate/echo', 'orgate:rate-limit now', false, 2);
  },
  async upstream_rate_limit() {
    // the chat fake answers `fake:429` with a 429 and Retry-After: 1, streamed or not.
    return { plain: await retried('chat', 'fake:429 please', false, 1), stream: await retried('chat', 'fake:429 please', true, 1) };
  },
  async server_error() {
    return failure(client().responses.create({ model: 'orgate/echo', input: 'orgate:fail now' }));
  },
  async stream_fail_mid() {
    const stream = client().responses.stream({ model: 'orgate/echo', input: 'orgate:fail-mid one two three four five six' });
    const types = [];
    stream.on('event', (e) => types.push(e.type));
    const err = await failure(stream.finalResponse());
    return { ...err, types };
  },
  async stream_fail_mid_raw() {
    const stream = await client().responses.create({ model: 'orgate/echo', input: 'orgate:fail-mid one two three four five six', stream: true });
    const types = [];
    let thrown = null;
    try {
      for await (const event of stream) types.push(event.type);
    } catch (err) {
      thrown = describeError(err);
    }
    return { types, thrown };
  },
  async models() {
    const ids = [];
    for await (const model of client().models.list()) ids.push({ id: model.id, object: model.object, owned_by: model.owned_by });
    const one = await client().models.retrieve('orgate/echo');
    const missing = await failure(client().models.retrieve('no-such-model'));
    return { ids, one, missing };
  },
});
