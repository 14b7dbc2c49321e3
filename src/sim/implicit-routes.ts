/**
 * The routes the simulated traffic takes when the scenario applies no ModelRoute: one aggregated
 * route per ModelServing, on its target role, so traffic with and without routes goes through the
 * same selection code (`chooseTarget`). Pure.
 */
import type { KubeObject } from "../engine/ports.ts";
import type { RouterRoute } from "../router/route.ts";
import { compareStrings } from "../core/maps.ts";
import { isJsonObject } from "./json.ts";

/** The role requests go to without a route: the first whose name contains "decode", else the first. */
export function targetRole(roles: readonly string[]): string | undefined {
  return roles.find((role) => role.includes("decode")) ?? roles[0];
}

/**
 * An aggregated route per ModelServing with a role, named and modelled after it, serving its
 * target role, with no retries (a request sent to a pod that is gone fails, as a client without a
 * router's retries sees it). Sorted by namespace, then name.
 */
export function implicitRoutes(modelServings: readonly KubeObject[]): RouterRoute[] {
  const routes: RouterRoute[] = [];
  for (const modelServing of modelServings) {
    const serve = targetRole(roleNames(modelServing));
    if (serve === undefined) continue;
    const { namespace = "", name } = modelServing.metadata;
    routes.push({
      namespace,
      name,
      model: name,
      modelServing: name,
      engine: "vllm",
      port: 8000,
      roles: { serve },
      kvConnector: "nixl",
      pairing: "SameGroup",
      retries: { attempts: 0 },
      timeouts: { firstByteSeconds: 60, idleSeconds: 300 },
    });
  }
  return routes.sort((a, b) => compareStrings(a.namespace, b.namespace) || compareStrings(a.name, b.name));
}

/** `spec.template.roles[].name` of a ModelServing, in spec order; malformed entries skipped. */
function roleNames(modelServing: KubeObject): string[] {
  const template = modelServing.spec?.["template"];
  const roles = isJsonObject(template) ? template["roles"] : undefined;
  if (!Array.isArray(roles)) return [];
  return roles.flatMap((role) => (isJsonObject(role) && typeof role["name"] === "string" ? [role["name"]] : []));
}
