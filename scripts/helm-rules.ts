/**
 * `node scripts/helm-rules.ts` (run by `npm run manifests`): writes the Helm chart's RBAC rules,
 * deploy/helm/tandem/templates/_rules.tpl, from the same permissions `tandem manifests` renders
 * (`renderHelmRules`); a unit test (test/helm-chart.test.ts) keeps the file current.
 */
import { writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { renderHelmRules } from "../src/kube/install.ts";

export const HELM_RULES_FILE = join(import.meta.dirname, "..", "deploy", "helm", "tandem", "templates", "_rules.tpl");

if (import.meta.main) {
  writeFileSync(HELM_RULES_FILE, renderHelmRules(), "utf8");
  process.stdout.write(`Wrote ${relative(process.cwd(), HELM_RULES_FILE)}\n`);
}
