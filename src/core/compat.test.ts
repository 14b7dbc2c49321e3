import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { FINALIZER_RECOVERY } from "../api/wellknown.ts";
import type { Observed } from "./observed.ts";
import { plan } from "./plan.ts";

const GOLDEN = join(import.meta.dirname, "../../test/golden/compat");

interface Golden extends Observed {
  readonly modelServing: any;
  readonly revisions: any[];
}

function load(file: string): Golden {
  // Stored objects only: routers are what the engine observes of Leases, none here.
  return { routers: [], ...(JSON.parse(readFileSync(join(GOLDEN, file), "utf8")) as Omit<Golden, "routers">) };
}

const LATER = Date.parse("2027-06-01T00:00:00Z");

describe("compatibility with objects written by earlier releases", () => {
  it("v0.1.0, a held RoleRollingUpdate canary: one reconcile only adds the recovery finalizer to each pod and rewrites the label selector, and the next plans zero writes", () => {
    const observed = load("v0.1.0-pd-partitioned.json");
    const { actions } = plan(observed, LATER);
    // Pods from before tracking get the finalizer, once (docs/design/pod-tracking.md); nothing rolls.
    // The selector no longer names instance 0 (docs/design/succession.md): one status write.
    assert.deepEqual(
      actions.map((action) => (action.type === "SetPodFinalizers" ? [action.name, action.finalizers] : [action.type])),
      [...observed.pods.map((pod) => [pod.metadata.name, [FINALIZER_RECOVERY]]), ["WriteStatus"]],
    );
    const written = actions.find((action) => action.type === "WriteStatus");
    assert.ok(written?.type === "WriteStatus");
    assert.deepEqual(
      { ...written.status, labelSelector: observed.modelServing.status.labelSelector },
      observed.modelServing.status,
    );
    const tracked = observed.pods.map((pod) => ({
      ...pod,
      metadata: { ...pod.metadata, finalizers: [FINALIZER_RECOVERY] },
    }));
    const modelServing = { ...observed.modelServing, status: written.status };
    assert.deepEqual(plan({ ...observed, modelServing, pods: tracked }, LATER).actions, []);
  });
});

describe("an unreadable revision", () => {
  it("pauses what depends on it with RevisionUnreadable, and guesses nothing", () => {
    const observed = load("v0.1.0-pd-partitioned.json");
    const current: string = observed.modelServing.status.currentRevision;
    const stored = observed.revisions.find((revision) => revision.metadata.name === current);
    stored.data.roles[0].entryTemplate.spec.containers[0].image = "tampered:latest";
    // Group 0's decode instance is lost: it would be rebuilt from the (now unreadable) current revision.
    const pods = observed.pods.filter((pod) => !pod.metadata.name.startsWith("llama-pd-0-decode-0-"));
    const { actions } = plan({ ...observed, pods }, LATER);
    assert.ok(!actions.some((action) => action.type === "CreatePod" || action.type === "DeletePod"));
    const write = actions.find((action) => action.type === "WriteStatus");
    assert.ok(write?.type === "WriteStatus");
    const condition = write.status.conditions?.find((candidate) => candidate.type === "RevisionUnreadable");
    assert.equal(condition?.status, "True");
    // One line per unreadable revision, each unit named once however often the plan looked at it.
    assert.match(
      condition.message ?? "",
      new RegExp(
        `^Paused what depends on an unreadable revision: revision ${current} is unreadable: data does not reproduce the recorded hash .* \\(pauses decode-0 of group 0, decode-0 of group 1, prefill-0 of group 0 and 5 more unit\\(s\\)\\)\\.$`,
      ),
    );
  });
});
