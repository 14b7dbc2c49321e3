/**
 * Both disaggregation protocols of DESIGN §7, from the engine's side.
 *
 * vLLM NIXL: a request whose `kv_transfer_params.do_remote_decode` is true is a **prefill** leg: it
 * answers (when capped by max_tokens, as vLLM does) with top-level `kv_transfer_params` for the
 * decode — `remote_host` deliberately "localhost", as vLLM's own, which the router must replace —
 * plus `kv_format`, this mock's `--kv-format`. A request whose `do_remote_prefill` is true is a
 * **decode** leg: its parameters must be complete and well-typed, `kv_format` must equal this
 * mock's (else HTTP 400 `kv format mismatch`), and `remote_host` must not be localhost.
 *
 * SGLang bootstrap: a request with `bootstrap_host`, `bootstrap_port` and `bootstrap_room` is one leg
 * of a pair that runs both legs at once. One mock cannot see its peer, so it checks that the three
 * fields are present and well-typed and then answers like an aggregated engine; it does not emulate
 * the KV transfer, the prefill/decode roles, nor a prefill aborting when its decode never arrives.
 *
 * Each protocol belongs to its engine: vLLM parameters sent to an sglang mock (or the reverse) are
 * refused, so a router speaking the wrong protocol is visible.
 */
import type { Engine } from "../../api/route.ts";
import type { Parsed } from "./openai.ts";

/** vLLM's default NIXL side-channel port (VLLM_NIXL_SIDE_CHANNEL_PORT), which a prefill reports. */
export const NIXL_SIDE_CHANNEL_PORT = 5600;
/** Tokens per KV block, for the block ids a prefill reports. */
const BLOCK_TOKENS = 16;

/** A whole request, a NIXL prefill or decode leg, or one leg of an SGLang bootstrap pair. */
export type Leg = "aggregated" | "prefill" | "decode" | "bootstrap";

const BOOTSTRAP_FIELDS = ["bootstrap_host", "bootstrap_port", "bootstrap_room"] as const;

function refuse(message: string): Parsed<Leg> {
  return { ok: false, message };
}

/** Which leg `body` is on an engine of kind `engine` reading `kvFormat`; a refusal names the field and the reason. */
export function legOf(body: Readonly<Record<string, unknown>>, engine: Engine, kvFormat: string): Parsed<Leg> {
  const params = body["kv_transfer_params"] as Readonly<Record<string, unknown>> | null | undefined;
  const bootstrap = BOOTSTRAP_FIELDS.filter((field) => body[field] !== undefined && body[field] !== null);
  if (
    params !== undefined &&
    params !== null &&
    (params["do_remote_decode"] === true || params["do_remote_prefill"] === true)
  ) {
    if (engine !== "vllm")
      return refuse(
        `kv_transfer_params is vLLM's NIXL protocol, but this engine is ${engine} (use bootstrap_host, bootstrap_port and bootstrap_room)`,
      );
    return nixlLeg(params, body, kvFormat);
  }
  if (bootstrap.length === 0) return { ok: true, value: "aggregated" };
  if (engine !== "sglang")
    return refuse(
      `${bootstrap.join(", ")}: SGLang's bootstrap protocol, but this engine is ${engine} (use kv_transfer_params)`,
    );
  return bootstrapLeg(body);
}

function nixlLeg(
  params: Readonly<Record<string, unknown>>,
  body: Readonly<Record<string, unknown>>,
  kvFormat: string,
): Parsed<Leg> {
  if (params["do_remote_decode"] === true && params["do_remote_prefill"] === true)
    return refuse("kv_transfer_params: do_remote_decode and do_remote_prefill cannot both be true");
  if (params["do_remote_decode"] === true) {
    if (body["stream"] === true)
      return refuse(
        "stream: a prefill leg (kv_transfer_params.do_remote_decode) must not stream: its kv_transfer_params come in the JSON answer",
      );
    return { ok: true, value: "prefill" };
  }
  const problem = remotePrefillProblem(params);
  if (problem !== undefined) return refuse(`kv_transfer_params.${problem}`);
  const format = params["kv_format"];
  if (format !== kvFormat) {
    return refuse(
      `kv format mismatch: kv_transfer_params.kv_format is ${typeof format === "string" ? JSON.stringify(format) : "missing"}, this decode reads ${JSON.stringify(kvFormat)} (the prefill runs another --kv-format)`,
    );
  }
  if (params["remote_host"] === "localhost")
    return refuse(
      "kv_transfer_params.remote_host is \"localhost\", the prefill engine's own view: the router must set it to the prefill pod's address",
    );
  return { ok: true, value: "decode" };
}

/** The first field of a decode's kv_transfer_params that is missing or mistyped, with the reason. */
function remotePrefillProblem(params: Readonly<Record<string, unknown>>): string | undefined {
  const nonEmptyString = (value: unknown): boolean => typeof value === "string" && value !== "";
  const checks: [string, (value: unknown) => boolean, string][] = [
    ["remote_engine_id", nonEmptyString, "a non-empty string"],
    ["remote_request_id", nonEmptyString, "a non-empty string"],
    [
      "remote_block_ids",
      (value) => Array.isArray(value) && value.every((id) => Number.isInteger(id) && (id as number) >= 0),
      "a list of block ids (integers ≥ 0)",
    ],
    ["remote_host", nonEmptyString, "a non-empty string"],
    [
      "remote_port",
      (value) => Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65_535,
      "a port (an integer from 1 to 65535)",
    ],
  ];
  for (const [field, ok, what] of checks) {
    if (!ok(params[field])) return `${field} must be ${what}, not ${JSON.stringify(params[field] ?? null)}`;
  }
  return undefined;
}

function bootstrapLeg(body: Readonly<Record<string, unknown>>): Parsed<Leg> {
  const missing = BOOTSTRAP_FIELDS.filter((field) => body[field] === undefined || body[field] === null);
  if (missing.length > 0)
    return refuse(
      `${missing.join(", ")}: required with ${BOOTSTRAP_FIELDS.filter((field) => !missing.includes(field)).join(", ")} (SGLang's bootstrap protocol sends all three)`,
    );
  const host = body["bootstrap_host"];
  const port = body["bootstrap_port"];
  const room = body["bootstrap_room"];
  if (typeof host !== "string" || host === "")
    return refuse(`bootstrap_host must be a non-empty string, not ${JSON.stringify(host)}`);
  if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65_535)
    return refuse(`bootstrap_port must be a port (an integer from 1 to 65535), not ${JSON.stringify(port)}`);
  if (!Number.isInteger(room) || (room as number) < 0)
    return refuse(`bootstrap_room must be an integer ≥ 0, not ${JSON.stringify(room)}`);
  return { ok: true, value: "bootstrap" };
}

/** What a prefill identifies itself by in the parameters it hands to the decode. */
export interface PrefillIdentity {
  readonly engineId: string;
  readonly requestId: string;
  readonly kvFormat: string;
  /** The first KV block id of this request (blocks are numbered per engine, in request order). */
  readonly firstBlockId: number;
}

/** The KV blocks a prompt of `promptTokens` tokens fills. */
export function blocksFor(promptTokens: number): number {
  return Math.ceil(promptTokens / BLOCK_TOKENS);
}

/** The top-level `kv_transfer_params` of a prefill's answer, in vLLM's shape plus `kv_format`. */
export function prefillTransferParams(identity: PrefillIdentity, promptTokens: number): Record<string, unknown> {
  return {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_block_ids: Array.from({ length: blocksFor(promptTokens) }, (_, index) => identity.firstBlockId + index),
    remote_engine_id: identity.engineId,
    remote_request_id: identity.requestId,
    remote_host: "localhost",
    remote_port: NIXL_SIDE_CHANNEL_PORT,
    tp_size: 1,
    kv_format: identity.kvFormat,
  };
}
