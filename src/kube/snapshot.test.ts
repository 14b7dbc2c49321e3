import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { historyCommand } from "../cli/rollout.ts";
import { SnapshotReader } from "./snapshot.ts";
import { fakeSend } from "./test-fakes.ts";
import { KubeTransport } from "./transport.ts";
import { KubeWriter } from "./writer.ts";

/** A ModelServing list whose only item has a pod template nested 20,000 deep, as JSON text. */
function deepList(): string {
  const depth = 20_000;
  const extra = `${'{"x":'.repeat(depth)}1${"}".repeat(depth)}`;
  return `{"items": [{"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelServing", "metadata": {"name": "m", "namespace": "ns"}, "spec": {"template": {"roles": [{"name": "r", "entryTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}], "extra": ${extra}}}}]}}}]}`;
}

describe("SnapshotReader", () => {
  it("hands out a deeply nested object (frozen, not copied), so `tandem rollout` says it is invalid instead of overflowing the stack", async () => {
    const { send } = fakeSend((request) => {
      const text = request.path.includes("modelservings") ? deepList() : '{"items": []}';
      return {
        status: 200,
        headers: { "content-type": "application/json" },
        text: () => Promise.resolve(text),
        stream: () => null,
      };
    });
    const transport = new KubeTransport(send);
    const output = await historyCommand(
      { reader: new SnapshotReader(transport, "ns", "m"), writer: new KubeWriter(transport) },
      { namespace: "ns", name: "m" },
    );
    assert.equal(output.exitCode, 1);
    assert.match(
      output.stderr,
      /^ModelServing ns\/m is invalid: spec\.template\.roles\[0\]\.entryTemplate\.spec\.extra(\.x){93}: nests objects and lists more than 100 levels deep\n$/,
    );
  });
});
