/**
 * The request bodies of disaggregated legs (DESIGN §7), exact to the engines' protocols: vLLM's
 * NixlConnector proxy protocol (prefill, then decode with the KV parameters the prefill returned)
 * and SGLang's bootstrap protocol (both legs at once, meeting in a bootstrap room). Pure: bodies
 * are parsed JSON objects, copied, never modified in place; the room comes from the caller's rng.
 */
import { isJsonObject } from "../engine/json.ts";
import type { JsonObject } from "../engine/ports.ts";
import type { Endpoint } from "./endpoints.ts";
import type { TieBreak } from "./select.ts";

/** What a NIXL prefill leg asks for: compute the KV cache and keep it for a remote decode. */
const NIXL_PREFILL_PARAMS: JsonObject = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/**
 * The NIXL prefill leg: the original body with the prefill `kv_transfer_params`, `stream: false`
 * (the router needs the whole JSON answer), no `stream_options` (vLLM rejects it without
 * streaming), `max_tokens: 1` and `max_completion_tokens: 1` when the body has it, and no
 * `min_tokens`/`min_completion_tokens` (vLLM rejects a minimum above the maximum).
 */
export function nixlPrefillBody(body: JsonObject): JsonObject {
  const leg: JsonObject = {
    ...structuredClone(body),
    kv_transfer_params: { ...NIXL_PREFILL_PARAMS },
    stream: false,
    max_tokens: 1,
  };
  if (Object.hasOwn(body, "max_completion_tokens")) leg.max_completion_tokens = 1;
  delete leg.stream_options;
  delete leg.min_tokens;
  delete leg.min_completion_tokens;
  return leg;
}

export type DecodeLeg =
  { readonly ok: true; readonly body: JsonObject } | { readonly ok: false; readonly reason: string };

/**
 * The NIXL decode leg: the original body plus the `kv_transfer_params` object the prefill
 * returned, with `remote_host` set to the prefill's address when it is missing, null or
 * `localhost` (vLLM fills in its own view of its host, which the decode cannot reach). A prefill
 * answer without `kv_transfer_params` (vLLM sends them only when it stopped at the length cap)
 * is a failed prefill, never a silent decode-only request.
 */
export function nixlDecodeBody(body: JsonObject, prefillResponse: unknown, prefill: Endpoint): DecodeLeg {
  const params = isJsonObject(prefillResponse) ? prefillResponse.kv_transfer_params : undefined;
  if (!isJsonObject(params))
    return { ok: false, reason: `prefill ${prefill.pod} returned no kv_transfer_params object` };
  const host = params.remote_host;
  const remoteHost = host === undefined || host === null || host === "localhost" ? prefill.address.host : host;
  return {
    ok: true,
    body: { ...structuredClone(body), kv_transfer_params: { ...structuredClone(params), remote_host: remoteHost } },
  };
}

/**
 * Bootstrap rooms are uniform in [0, 2^53): SGLang takes any non-negative integer (its own
 * router draws a u63), but JSON numbers above 2^53 − 1 lose precision in JavaScript (`JSON.parse`
 * in this router, engine-mock, and any JS client), so the room stays a safe integer that every
 * JSON reader round-trips exactly. Two requests in flight share a room with probability about
 * n²/2^54 — negligible for any n a router holds.
 */
export const BOOTSTRAP_ROOM_BITS = 53;

/** A room from two draws: 21 high bits and 32 low bits. */
export function drawBootstrapRoom(rng: TieBreak): number {
  const high = rng.int(0, 2 ** (BOOTSTRAP_ROOM_BITS - 32));
  const low = rng.int(0, 2 ** 32);
  return high * 2 ** 32 + low;
}

/**
 * The SGLang body, the same for both legs (sent at once: the prefill waits in the room for its
 * decode, so neither may wait for the other): the original body plus `bootstrap_host` (the
 * prefill's address), `bootstrap_port` (its bootstrap server) and `bootstrap_room`.
 */
export function sglangBody(body: JsonObject, prefill: Endpoint, room: number): JsonObject {
  return {
    ...structuredClone(body),
    bootstrap_host: prefill.address.host,
    bootstrap_port: prefill.bootstrapPort,
    bootstrap_room: room,
  };
}
