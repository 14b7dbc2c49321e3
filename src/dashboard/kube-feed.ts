/**
 * The dashboard over a real cluster (`tandem dashboard`): a KubeReader (list + watch, the same
 * informers as the controller's) of ModelServings, their pods and ControllerRevisions, and router
 * Leases from every namespace; the state is published when something changed (coalesced over
 * COALESCE_MS) and once a second for the timeline. Read-only: it never writes.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { LABEL_MODEL_SERVING, LABEL_ROUTER } from "../api/wellknown.ts";
import type { Logger } from "../engine/logger.ts";
import { WallClock } from "../kube/clock.ts";
import { KubeReader } from "../kube/reader.ts";
import { KubeTransport, clientNodeSend } from "../kube/transport.ts";
import { DashboardModel, SAMPLE_MS } from "./state.ts";
import type { DashboardState } from "./state.ts";

/** Changes within this long make one published state. */
const COALESCE_MS = 200;

export interface KubeFeedOptions {
  readonly kubeConfig: KubeConfig;
  /** Watch this namespace only; every namespace when undefined. */
  readonly namespace: string | undefined;
  readonly title: string;
  readonly publish: (state: DashboardState) => void;
  readonly logger: Logger;
}

export interface KubeFeed {
  stop(): Promise<void>;
}

export function startKubeFeed(options: KubeFeedOptions): KubeFeed {
  const clock = new WallClock();
  const reader = new KubeReader({
    transport: new KubeTransport(clientNodeSend(options.kubeConfig)),
    clock,
    kinds: ["ModelServing", "Pod", "ControllerRevision", "Lease"],
    namespace: options.namespace,
    labelSelectors: {
      Pod: LABEL_MODEL_SERVING,
      ControllerRevision: LABEL_MODEL_SERVING,
      Lease: `${LABEL_ROUTER}=true`,
    },
    clusterWideKinds: ["Lease"],
    logger: options.logger,
  });
  const model = new DashboardModel({ kind: "cluster", title: options.title }, clock.nowMs());
  model.setStep(
    options.namespace === undefined ? "Watching every namespace" : `Watching namespace ${options.namespace}`,
  );
  const publish = (): void => {
    if (!reader.hasSynced()) return;
    options.publish(
      model.state(
        {
          modelServings: reader.list("ModelServing"),
          pods: reader.list("Pod"),
          revisions: reader.list("ControllerRevision"),
          leases: reader.list("Lease"),
          nowMs: clock.nowMs(),
        },
        undefined,
      ),
    );
  };
  let pending: NodeJS.Timeout | undefined;
  const unsubscribe = reader.subscribe(() => {
    pending ??= setTimeout(() => {
      pending = undefined;
      publish();
    }, COALESCE_MS);
  });
  const sampler = setInterval(publish, SAMPLE_MS);
  reader.start();
  return {
    stop: async () => {
      clearInterval(sampler);
      if (pending !== undefined) clearTimeout(pending);
      unsubscribe();
      await reader.stop();
    },
  };
}
