/**
 * OpenAI-shaped error answers (`{error: {message, type, param, code}}`), so clients written for
 * the OpenAI API read the router's refusals as they read an engine's.
 */
import type { ServerResponse } from "node:http";

export type ErrorCode =
  | "invalid_json"
  | "missing_model"
  | "model_not_found"
  | "not_found"
  | "method_not_allowed"
  | "request_too_large"
  | "no_eligible_endpoint"
  | "router_unavailable"
  | "upstream_error"
  | "upstream_timeout"
  | "internal_error";

const STATUS: Readonly<Record<ErrorCode, number>> = {
  invalid_json: 400,
  missing_model: 400,
  model_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  request_too_large: 413,
  no_eligible_endpoint: 503,
  router_unavailable: 503,
  upstream_error: 502,
  upstream_timeout: 504,
  internal_error: 500,
};

/** An error the router answers with: the client's fault (4xx) or the serving side's (5xx). */
export interface RouterError {
  readonly code: ErrorCode;
  readonly message: string;
}

export function statusOf(code: ErrorCode): number {
  return STATUS[code];
}

export function errorBody(error: RouterError): {
  error: { message: string; type: string; param: null; code: ErrorCode };
} {
  const type = statusOf(error.code) < 500 ? "invalid_request_error" : "server_error";
  return { error: { message: error.message, type, param: null, code: error.code } };
}

/** Answers `error` unless the response has started (then there is nothing left to say). */
export function sendError(
  res: ServerResponse,
  error: RouterError,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const bytes = JSON.stringify(errorBody(error));
  res.writeHead(statusOf(error.code), {
    ...headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(bytes),
  });
  res.end(bytes);
}
