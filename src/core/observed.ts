/**
 * What the engine observes for one ModelServing and hands to `plan` (DESIGN §5). Everything comes
 * from the engine's cache, so any of it may be stale; the plan must be safe for any staleness the
 * executor's preconditions catch (UIDs, resourceVersions).
 */
import type { Pod, Service } from "../api/kube.ts";

export interface Observed {
  /** The ModelServing as stored (not yet parsed: the core parses and validates it). */
  readonly modelServing: unknown;
  /** Pods labelled `tandem.dev/modelserving=<name>` in its namespace (the core checks ownership). */
  readonly pods: readonly Pod[];
  /** Services labelled `tandem.dev/modelserving=<name>` in its namespace. */
  readonly services: readonly Service[];
  /** ControllerRevisions labelled `tandem.dev/modelserving=<name>`, as stored (the core decodes them). */
  readonly revisions: readonly unknown[];
}
