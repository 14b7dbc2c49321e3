/**
 * The wire format of the drain handshake between the controller and router replicas (DESIGN §3):
 * a router replica's registration Lease and its per-pod drain confirmation. Both sides build and
 * read them here, so the two can never disagree on a name. Pure.
 */
import { ANNOTATION_ROUTER_SCOPE, LABEL_ROUTER } from "./wellknown.ts";

/** Prefix of a router replica's drain confirmation, `drained.tandem.dev/<router-id>: "true"` (DESIGN §3.4). */
export const DRAINED_PREFIX = "drained.tandem.dev/";

/** Default `leaseDurationSeconds` of a router Lease (DESIGN §3.1). */
export const ROUTER_LEASE_DURATION_SECONDS = 15;

/** The annotation key of `routerId`'s drain confirmation. */
export function drainedAnnotation(routerId: string): string {
  return `${DRAINED_PREFIX}${routerId}`;
}

/** The router ids that confirmed a pod's drain (annotations `drained.tandem.dev/<id>: "true"`), sorted. */
export function drainConfirmations(annotations: Readonly<Record<string, string>> | undefined): string[] {
  if (annotations === undefined) return [];
  return Object.keys(annotations)
    .filter((key) => key.startsWith(DRAINED_PREFIX) && annotations[key] === "true")
    .map((key) => key.slice(DRAINED_PREFIX.length))
    .sort();
}

/** Every drain confirmation key present on a pod, whatever its value (cancelling removes them all). */
export function drainConfirmationKeys(annotations: Readonly<Record<string, string>> | undefined): string[] {
  return Object.keys(annotations ?? {})
    .filter((key) => key.startsWith(DRAINED_PREFIX))
    .sort();
}

/** Which namespaces a router routes: every one, or those listed. */
export type RouterScope = { readonly all: true } | { readonly all: false; readonly namespaces: readonly string[] };

/** `tandem.dev/scope`: `*`, or a comma list of namespaces (blanks ignored). A missing value means `*`. */
export function parseRouterScope(value: string | undefined): RouterScope {
  const items = (value ?? "*")
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
  if (items.length === 0 || items.includes("*")) return { all: true };
  return { all: false, namespaces: [...new Set(items)].sort() };
}

/** The annotation value of `scope`. */
export function formatRouterScope(scope: RouterScope): string {
  return scope.all ? "*" : scope.namespaces.join(",");
}

export function scopeCovers(scope: RouterScope, namespace: string): boolean {
  return scope.all || scope.namespaces.includes(namespace);
}

/** A router replica's Lease as the controller reads it. */
export interface RouterLease {
  /** `<router-id>`: `spec.holderIdentity`, else the Lease's name. */
  readonly id: string;
  readonly scope: RouterScope;
  readonly leaseDurationSeconds: number;
  /** `spec.renewTime` as stored (compared for change only, never with a clock). */
  readonly renewTime: string;
}

interface LeaseLike {
  readonly metadata: {
    readonly name: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec?: unknown;
}

/**
 * A Lease labelled `tandem.dev/router: "true"` as a router registration, or undefined for any other
 * Lease. A missing or non-positive duration reads as the default; a missing renewTime as "".
 */
export function parseRouterLease(lease: LeaseLike): RouterLease | undefined {
  if (lease.metadata.labels?.[LABEL_ROUTER] !== "true") return undefined;
  const spec = typeof lease.spec === "object" && lease.spec !== null ? (lease.spec as Record<string, unknown>) : {};
  const holder = spec["holderIdentity"];
  const duration = spec["leaseDurationSeconds"];
  const renewTime = spec["renewTime"];
  return {
    id: typeof holder === "string" && holder !== "" ? holder : lease.metadata.name,
    scope: parseRouterScope(lease.metadata.annotations?.[ANNOTATION_ROUTER_SCOPE]),
    leaseDurationSeconds:
      typeof duration === "number" && Number.isInteger(duration) && duration > 0
        ? duration
        : ROUTER_LEASE_DURATION_SECONDS,
    renewTime: typeof renewTime === "string" ? renewTime : "",
  };
}

/** Kubernetes MicroTime, as a Lease's `renewTime` holds it: RFC 3339 with 6 fractional digits. */
export function microTime(epochMs: number): string {
  return new Date(epochMs).toISOString().replace("Z", "000Z");
}

/** The Lease that registers router replica `id` (DESIGN §3.1), renewed at `nowMs` (epoch ms). */
export function routerLeaseObject(input: {
  readonly id: string;
  readonly namespace: string;
  readonly scope: RouterScope;
  readonly leaseDurationSeconds: number;
  readonly nowMs: number;
}): {
  apiVersion: "coordination.k8s.io/v1";
  kind: "Lease";
  metadata: { name: string; namespace: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: { holderIdentity: string; leaseDurationSeconds: number; acquireTime: string; renewTime: string };
} {
  const now = microTime(input.nowMs);
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name: input.id,
      namespace: input.namespace,
      labels: { [LABEL_ROUTER]: "true" },
      annotations: { [ANNOTATION_ROUTER_SCOPE]: formatRouterScope(input.scope) },
    },
    spec: {
      holderIdentity: input.id,
      leaseDurationSeconds: input.leaseDurationSeconds,
      acquireTime: now,
      renewTime: now,
    },
  };
}
