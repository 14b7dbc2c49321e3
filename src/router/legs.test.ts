import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Prng } from "../sim/prng.ts";
import type { Endpoint } from "./endpoints.ts";
import { drawBootstrapRoom, nixlDecodeBody, nixlPrefillBody, sglangBody } from "./legs.ts";

const prefill: Endpoint = {
  key: "ns/ms-0-prefill-0-0",
  pod: "ms-0-prefill-0-0",
  namespace: "ns",
  role: "prefill",
  group: "0",
  revision: "ms-v1",
  roleHash: "0123456789",
  address: { host: "10.1.2.3", port: 8000 },
  bootstrapPort: 9001,
};

// A chat request as a client sends it, streaming, with every field the legs rewrite.
const chat = {
  model: "m",
  messages: [{ role: "user", content: "hi" }],
  stream: true,
  stream_options: { include_usage: true },
  max_tokens: 64,
  max_completion_tokens: 64,
  min_tokens: 8,
  min_completion_tokens: 8,
  temperature: 0,
};

describe("NIXL legs (golden)", () => {
  it("prefill leg: kv_transfer_params with the six fields, no stream, one token, no minimums", () => {
    assert.deepEqual(nixlPrefillBody(chat), {
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: false,
      max_tokens: 1,
      max_completion_tokens: 1,
      temperature: 0,
      kv_transfer_params: {
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      },
    });
  });

  it("prefill leg: max_completion_tokens only where the request had it; max_tokens always", () => {
    assert.deepEqual(nixlPrefillBody({ model: "m", prompt: "x" }), {
      model: "m",
      prompt: "x",
      stream: false,
      max_tokens: 1,
      kv_transfer_params: {
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      },
    });
  });

  // What vLLM's prefill answers (stopped at the length cap): top-level kv_transfer_params.
  const prefillAnswer = {
    id: "cmpl-1",
    object: "text_completion",
    choices: [{ index: 0, text: "H", finish_reason: "length" }],
    kv_transfer_params: {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: [1, 2, 3],
      remote_engine_id: "engine-7",
      remote_request_id: "req-1",
      remote_host: "localhost",
      remote_port: 5600,
      tp_size: 1,
    },
  };

  it("decode leg: the original body plus the returned params, remote_host set to the prefill's IP", () => {
    assert.deepEqual(nixlDecodeBody(chat, prefillAnswer, prefill), {
      ok: true,
      body: {
        ...chat,
        kv_transfer_params: {
          do_remote_prefill: true,
          do_remote_decode: false,
          remote_block_ids: [1, 2, 3],
          remote_engine_id: "engine-7",
          remote_request_id: "req-1",
          remote_host: "10.1.2.3",
          remote_port: 5600,
          tp_size: 1,
        },
      },
    });
  });

  it("decode leg: remote_host kept when it is a real host, set when missing or null", () => {
    const withHost = { kv_transfer_params: { ...prefillAnswer.kv_transfer_params, remote_host: "10.9.9.9" } };
    const leg = nixlDecodeBody(chat, withHost, prefill);
    assert.equal(leg.ok && (leg.body.kv_transfer_params as { remote_host: string }).remote_host, "10.9.9.9");
    for (const host of [undefined, null]) {
      const params: Record<string, unknown> = { ...prefillAnswer.kv_transfer_params, remote_host: host };
      if (host === undefined) delete params.remote_host;
      const set = nixlDecodeBody(chat, { kv_transfer_params: params }, prefill);
      assert.equal(set.ok && (set.body.kv_transfer_params as { remote_host: string }).remote_host, "10.1.2.3");
    }
  });

  it("decode leg: a prefill answer without kv_transfer_params is a failure, not a decode-only request", () => {
    assert.deepEqual(nixlDecodeBody(chat, { choices: [] }, prefill), {
      ok: false,
      reason: "prefill ms-0-prefill-0-0 returned no kv_transfer_params object",
    });
    assert.equal(nixlDecodeBody(chat, "not json", prefill).ok, false);
  });

  it("never modifies the client's body", () => {
    const body = structuredClone(chat);
    nixlPrefillBody(body);
    nixlDecodeBody(body, prefillAnswer, prefill);
    sglangBody(body, prefill, 5);
    assert.deepEqual(body, chat);
  });
});

describe("SGLang legs (golden)", () => {
  it("one body for both legs: the original plus bootstrap host, port and room", () => {
    assert.deepEqual(sglangBody({ model: "m", prompt: "x", stream: true }, prefill, 1234567890123), {
      model: "m",
      prompt: "x",
      stream: true,
      bootstrap_host: "10.1.2.3",
      bootstrap_port: 9001,
      bootstrap_room: 1234567890123,
    });
  });

  it("rooms are safe integers below 2^53 that round-trip exactly through JSON", () => {
    const rng = new Prng(3);
    fc.assert(
      fc.property(fc.constant(null), () => {
        const room = drawBootstrapRoom(rng);
        assert.ok(Number.isSafeInteger(room) && room >= 0 && room < 2 ** 53);
        const parsed = JSON.parse(JSON.stringify(sglangBody({ model: "m" }, prefill, room))) as {
          bootstrap_room: number;
        };
        assert.equal(parsed.bootstrap_room, room);
        assert.match(JSON.stringify(room), /^[0-9]+$/);
      }),
    );
    const top = drawBootstrapRoom({ int: (_min, max) => max - 1 });
    assert.equal(top, 2 ** 53 - 1);
  });
});
