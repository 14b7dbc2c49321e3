/**
 * HTTP failures of the Kubernetes API and their mapping onto the engine's `ApiError` reasons
 * (src/engine/ports.ts). Pure: the transport builds a `KubeHttpError` from a response, the
 * writer and reader turn it into an `ApiError`.
 */
import { ApiError } from "../engine/ports.ts";
import type { ApiErrorReason } from "../engine/ports.ts";

/** A non-2xx answer, or no answer at all (`status` 0), with the API server's `Status` fields. */
export class KubeHttpError extends Error {
  /** HTTP status; 0 when the request never got an answer (network failure, client timeout). */
  readonly status: number;
  /** `Status.reason` (`AlreadyExists`, `Conflict`, `Expired`, ...); "" when absent. */
  readonly reason: string;
  /** Seconds from a `Retry-After` header, when the server sent one. */
  readonly retryAfterSeconds: number | undefined;
  /** True when the request may have been applied (client timeout, connection reset). */
  readonly ambiguous: boolean;
  /** The fields `Status.details.causes` names (`metadata.uid`); empty when none. */
  readonly causeFields: readonly string[];

  constructor(fields: {
    status: number;
    reason: string;
    message: string;
    retryAfterSeconds?: number | undefined;
    ambiguous?: boolean;
    causeFields?: readonly string[];
  }) {
    super(fields.message);
    this.name = "KubeHttpError";
    this.status = fields.status;
    this.reason = fields.reason;
    this.retryAfterSeconds = fields.retryAfterSeconds;
    this.ambiguous = fields.ambiguous ?? false;
    this.causeFields = fields.causeFields ?? [];
  }
}

/** Builds the error for a non-2xx response of `what` (`PATCH pods/x`) from its body and headers. */
export function httpError(
  what: string,
  status: number,
  bodyText: string,
  headers: Readonly<Record<string, string>>,
): KubeHttpError {
  const body = parseStatus(bodyText);
  const message = `${what}: ${status} ${body.message ?? (bodyText.slice(0, 300) || "(no body)")}`;
  return new KubeHttpError({
    status,
    reason: body.reason ?? "",
    message,
    retryAfterSeconds: retryAfter(headers["retry-after"]),
    causeFields: body.causeFields,
  });
}

/** The error for a request that got no answer: ambiguous unless the connection was refused. */
export function transportError(what: string, cause: unknown): KubeHttpError {
  const code = causeCode(cause);
  const refused = code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN";
  const detail =
    cause instanceof Error ? `${cause.name}: ${cause.message}${code === undefined ? "" : ` (${code})`}` : String(cause);
  return new KubeHttpError({
    status: 0,
    reason: refused ? "ConnectionRefused" : "NoAnswer",
    message: `${what}: ${detail}`,
    ambiguous: !refused,
  });
}

/**
 * The port's reason for an HTTP failure: 404 NotFound; 409 AlreadyExists or Conflict by
 * `Status.reason`; 400/401/403/415/422 Invalid (the request can never succeed as sent);
 * 504, a server-side timeout, or no answer after the request was sent: Timeout; anything
 * else (5xx, 429 after its retries, a refused connection): ServerError.
 */
export function apiErrorReason(error: KubeHttpError): ApiErrorReason {
  switch (error.status) {
    case 404:
      return "NotFound";
    case 409:
      return error.reason === "AlreadyExists" ? "AlreadyExists" : "Conflict";
    case 400:
    case 401:
    case 403:
    case 415:
    case 422:
      return "Invalid";
    case 504:
      return "Timeout";
    case 0:
      return error.ambiguous ? "Timeout" : "ServerError";
    default:
      return error.reason === "Timeout" || error.reason === "ServerTimeout" ? "Timeout" : "ServerError";
  }
}

/** `error` as the engine's ApiError (already-ApiErrors pass through; other errors are bugs and rethrown). */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof KubeHttpError) return new ApiError(apiErrorReason(error), error.message);
  throw error;
}

function parseStatus(text: string): { message?: string; reason?: string; causeFields: string[] } {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null) return { causeFields: [] };
    const { message, reason, details } = value as {
      message?: unknown;
      reason?: unknown;
      details?: { causes?: { field?: unknown }[] };
    };
    const causeFields = (Array.isArray(details?.causes) ? details.causes : []).flatMap((cause) =>
      typeof cause.field === "string" ? [cause.field] : [],
    );
    return {
      ...(typeof message === "string" ? { message } : {}),
      ...(typeof reason === "string" ? { reason } : {}),
      causeFields,
    };
  } catch {
    return { causeFields: [] };
  }
}

/** Seconds of a `Retry-After` header given in seconds (the API server never sends an HTTP date). */
function retryAfter(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number.parseInt(value, 10);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
}

function causeCode(cause: unknown): string | undefined {
  let current: unknown = cause;
  // Undici nests the system error one or two levels down in `cause`.
  for (let depth = 0; depth < 4 && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
