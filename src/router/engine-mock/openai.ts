/**
 * The OpenAI-compatible surface of the engine mock: request bodies of `POST /v1/completions` and
 * `POST /v1/chat/completions` checked with zod (unknown fields kept, as engines do), what to
 * generate for them, and the JSON and SSE shapes of the answers (vLLM's field names and order).
 */
import { z } from "zod";
import { problemsFromZod } from "../../api/problems.ts";
import { countTokens, naturalLength } from "./text.ts";

export type Endpoint = "completion" | "chat";

/** Tokens generated when a request names no max_tokens / max_completion_tokens. */
export const DEFAULT_MAX_TOKENS = 16;

const TokenCount = z.int().min(1).nullish();

const CommonFields = {
  model: z.string().min(1).optional(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: TokenCount,
  min_tokens: z.int().min(0).nullish(),
  n: z.literal(1, { error: "must be 1: the engine mock answers with one choice" }).nullish(),
  ignore_eos: z.boolean().nullish(),
  kv_transfer_params: z.looseObject({}).nullish(),
};

const CompletionRequest = z.looseObject({
  ...CommonFields,
  prompt: z.union([z.string(), z.tuple([z.string()])], { error: "must be a string (or a list of one string)" }),
});

const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

const ChatRequest = z.looseObject({
  ...CommonFields,
  max_completion_tokens: TokenCount,
  min_completion_tokens: z.int().min(0).nullish(),
  messages: z
    .array(
      z.looseObject({ role: z.string(), content: z.union([z.string(), z.array(ContentPart), z.null()]).optional() }),
    )
    .min(1),
});

export type GenerationBody = z.infer<typeof CompletionRequest> | z.infer<typeof ChatRequest>;

/** What one request asks the engine to generate. */
export interface Generation {
  readonly endpoint: Endpoint;
  readonly body: GenerationBody;
  /** The text the answer is a function of (completions: the prompt; chat: the rendered messages). */
  readonly prompt: string;
  readonly promptTokens: number;
  /** Tokens the answer has. */
  readonly completionTokens: number;
  readonly finishReason: "length" | "stop";
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string };

/** The prompt and token bounds of a request, read per endpoint. */
interface Asked {
  readonly body: GenerationBody;
  readonly prompt: string;
  readonly maxTokens: number;
  readonly minTokens: number;
}

function asked(endpoint: Endpoint, input: unknown): Parsed<Asked> {
  const failed = (error: z.ZodError): Parsed<Asked> => ({
    ok: false,
    message: problemsFromZod(error.issues)
      .map((p) => `${p.path}: ${p.reason}`)
      .join("; "),
  });
  if (endpoint === "chat") {
    const parsed = ChatRequest.safeParse(input, { reportInput: true });
    if (!parsed.success) return failed(parsed.error);
    const body = parsed.data;
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? DEFAULT_MAX_TOKENS;
    return {
      ok: true,
      value: {
        body,
        prompt: renderMessages(body.messages),
        maxTokens,
        minTokens: body.min_completion_tokens ?? body.min_tokens ?? 0,
      },
    };
  }
  const parsed = CompletionRequest.safeParse(input, { reportInput: true });
  if (!parsed.success) return failed(parsed.error);
  const body = parsed.data;
  const prompt = typeof body.prompt === "string" ? body.prompt : body.prompt[0];
  return {
    ok: true,
    value: { body, prompt, maxTokens: body.max_tokens ?? DEFAULT_MAX_TOKENS, minTokens: body.min_tokens ?? 0 },
  };
}

/** Checks a request body and says what to generate; the message names the field and the reason. */
export function parseGeneration(endpoint: Endpoint, input: unknown): Parsed<Generation> {
  const read = asked(endpoint, input);
  if (!read.ok) return read;
  const { body, prompt, maxTokens, minTokens } = read.value;
  if (minTokens > maxTokens)
    return { ok: false, message: `min_tokens (${minTokens}) must be less than or equal to max_tokens (${maxTokens})` };
  const natural = Math.max(naturalLength(prompt), minTokens);
  // Capped before the answer ends by itself: "length"; else the answer ends with its EOS: "stop".
  const capped = body.ignore_eos === true || maxTokens <= natural;
  return {
    ok: true,
    value: {
      endpoint,
      body,
      prompt,
      promptTokens: countTokens(prompt),
      completionTokens: capped ? maxTokens : natural,
      finishReason: capped ? "length" : "stop",
      stream: body.stream === true,
      includeUsage: body.stream_options?.include_usage === true,
    },
  };
}

function renderMessages(messages: z.infer<typeof ChatRequest>["messages"]): string {
  return messages
    .map(
      ({ role, content }) =>
        `${role}: ${typeof content === "string" ? content : (content ?? []).map((part) => part.text ?? "").join("")}`,
    )
    .join("\n");
}

/** The identity of one answer: its id (`cmpl-…` or `chatcmpl-…`), creation time and model. */
export interface AnswerHeader {
  readonly id: string;
  /** Unix seconds, from the mock's injected clock. */
  readonly created: number;
  readonly model: string;
}

export function answerId(endpoint: Endpoint, requestId: string): string {
  return `${endpoint === "chat" ? "chatcmpl" : "cmpl"}-${requestId}`;
}

function usageOf(generation: Generation, completionTokens: number): Record<string, number> {
  return {
    prompt_tokens: generation.promptTokens,
    total_tokens: generation.promptTokens + completionTokens,
    completion_tokens: completionTokens,
  };
}

/** The JSON answer (`stream: false`), with `extra` top-level fields (a prefill's kv_transfer_params). */
export function answerJson(
  generation: Generation,
  header: AnswerHeader,
  text: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const choice =
    generation.endpoint === "chat"
      ? {
          index: 0,
          message: { role: "assistant", content: text },
          logprobs: null,
          finish_reason: generation.finishReason,
        }
      : { index: 0, text, logprobs: null, finish_reason: generation.finishReason };
  return {
    id: header.id,
    object: generation.endpoint === "chat" ? "chat.completion" : "text_completion",
    created: header.created,
    model: header.model,
    choices: [choice],
    usage: usageOf(generation, generation.completionTokens),
    ...extra,
  };
}

function chunk(
  generation: Generation,
  header: AnswerHeader,
  choices: unknown[],
  usage?: Record<string, number>,
): string {
  const object = generation.endpoint === "chat" ? "chat.completion.chunk" : "text_completion";
  const body = {
    id: header.id,
    object,
    created: header.created,
    model: header.model,
    choices,
    ...(usage === undefined ? {} : { usage }),
  };
  return `data: ${JSON.stringify(body)}\n\n`;
}

/**
 * The SSE events that carry token `index` of the answer: chat opens with the assistant's role;
 * the last token's event carries the finish reason.
 */
export function tokenEvents(generation: Generation, header: AnswerHeader, index: number, token: string): string {
  const finishReason = index === generation.completionTokens - 1 ? generation.finishReason : null;
  if (generation.endpoint === "completion")
    return chunk(generation, header, [{ index: 0, text: token, logprobs: null, finish_reason: finishReason }]);
  const opening =
    index === 0
      ? chunk(generation, header, [
          { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
        ])
      : "";
  return (
    opening +
    chunk(generation, header, [{ index: 0, delta: { content: token }, logprobs: null, finish_reason: finishReason }])
  );
}

/** The SSE events after the last token: the usage chunk when asked for, then `[DONE]`. */
export function closingEvents(generation: Generation, header: AnswerHeader): string {
  const usage = generation.includeUsage
    ? chunk(generation, header, [], usageOf(generation, generation.completionTokens))
    : "";
  return `${usage}data: [DONE]\n\n`;
}

/** An OpenAI-shaped error body (vLLM's ErrorResponse). */
export function errorJson(status: number, message: string): Record<string, unknown> {
  const type = status === 404 ? "NotFoundError" : status >= 500 ? "InternalServerError" : "BadRequestError";
  return { error: { message, type, param: null, code: status } };
}
