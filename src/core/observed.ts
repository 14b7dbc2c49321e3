/**
 * What the engine observes for one ModelServing and hands to `plan` (DESIGN §5). Everything comes
 * from the engine's cache, so any of it may be stale; the plan must be safe for any staleness the
 * executor's preconditions catch (UIDs, resourceVersions).
 */
import type { Pod, Service } from "../api/kube.ts";
import type { RouterScope } from "../api/router-lease.ts";

/**
 * A router replica registered by its Lease (DESIGN §3.1), as the engine judges its liveness on its
 * own clock: live while `nowMs < liveUntilMs` (the last observed change of its `renewTime` plus
 * its `leaseDurationSeconds`). The core decides "live" from this number alone.
 */
export interface ObservedRouter {
  /** `<router-id>`: its confirmations are `drained.tandem.dev/<id>`. */
  readonly id: string;
  readonly scope: RouterScope;
  readonly liveUntilMs: number;
}

export interface Observed {
  /** The ModelServing as stored (not yet parsed: the core parses and validates it). */
  readonly modelServing: unknown;
  /** Pods labelled `tandem.dev/modelserving=<name>` in its namespace (the core checks ownership). */
  readonly pods: readonly Pod[];
  /** Services labelled `tandem.dev/modelserving=<name>` in its namespace. */
  readonly services: readonly Service[];
  /** ControllerRevisions labelled `tandem.dev/modelserving=<name>`, as stored (the core decodes them). */
  readonly revisions: readonly unknown[];
  /** Every router Lease the engine has seen (all namespaces), live or not; the core filters by scope. */
  readonly routers: readonly ObservedRouter[];
}
