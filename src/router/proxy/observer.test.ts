import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AnswerTap } from "./observer.ts";

function tapOf(...chunks: string[]): AnswerTap {
  const tap = new AnswerTap(() => undefined);
  for (const chunk of chunks) tap.observe(Buffer.from(chunk, "latin1"));
  return tap;
}

describe("AnswerTap.usage", () => {
  it("reads the usage of a JSON answer, spaces around the colon allowed", () => {
    const tap = tapOf('{"choices":[],"usage":{"prompt_tokens" : 12,"total_tokens":19,"completion_tokens":\n7}}');
    assert.deepEqual(tap.usage(), { promptTokens: 12, completionTokens: 7 });
  });

  it("takes the last usage of a stream, across chunk boundaries", () => {
    const tap = tapOf(
      'data: {"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n',
      'data: {"usage":{"prompt_tokens":3,"compl',
      'etion_tokens":42}}\n\ndata: [DONE]\n\n',
    );
    assert.deepEqual(tap.usage(), { promptTokens: 3, completionTokens: 42 });
  });

  it("has no counts when the answer carries none, or a field without a number", () => {
    assert.deepEqual(tapOf('{"choices":[]}').usage(), { promptTokens: undefined, completionTokens: undefined });
    assert.deepEqual(tapOf('{"prompt_tokens":null,"completion_tokens":"5"}').usage(), {
      promptTokens: undefined,
      completionTokens: undefined,
    });
  });

  it("keeps only the answer's last 4 KiB", () => {
    const tap = tapOf('{"usage":{"prompt_tokens":1,"completion_tokens":2}}', "x".repeat(5_000));
    assert.deepEqual(tap.usage(), { promptTokens: undefined, completionTokens: undefined });
  });
});
