/**
 * The dashboard page in headless Chromium (Debian's `chromium`, driven by playwright-core), over
 * the simulator: the test holds the scenario before chosen steps (virtual time stands still while
 * the page is checked) and waits only for DOM conditions, never for wall time. Everything binds
 * to 127.0.0.1. Skips, saying why, when no Chromium is installed (`apt-get install -y chromium`,
 * or set CHROMIUM_PATH).
 *
 * Screenshots of two moments (mid-rollout, rollout complete) are written to
 * .cache/test-artifacts/dashboard/, and to docs/images/ with TANDEM_UPDATE_SCREENSHOTS=1.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium } from "playwright-core";
import type { Browser, Page } from "playwright-core";
import { dashboardScenario } from "../../src/dashboard/fixtures.ts";
import { startDashboardServer } from "../../src/dashboard/server.ts";
import type { DashboardServer } from "../../src/dashboard/server.ts";
import { SimFeed } from "../../src/dashboard/sim-feed.ts";
import { runScenario } from "../../src/sim/runner.ts";
import type { Report } from "../../src/sim/report.ts";

const ROOT = join(import.meta.dirname, "../..");
const ARTIFACTS = join(ROOT, ".cache/test-artifacts/dashboard");
/** Every wait for the page is bounded: a broken page fails the test instead of hanging it. */
const DOM_TIMEOUT_MS = 20_000;

function findChromium(): string | undefined {
  const candidates = [process.env["CHROMIUM_PATH"], "/usr/bin/chromium", "/usr/bin/chromium-browser"];
  return candidates.find((path) => path !== undefined && path !== "" && existsSync(path));
}

const executablePath = findChromium();
const skip =
  executablePath === undefined
    ? "no Chromium found (install Debian's chromium: apt-get install -y chromium, or set CHROMIUM_PATH)"
    : false;
if (skip !== false) process.stdout.write(`dashboard browser tests skipped: ${skip}\n`);

/** Holds the scenario before the steps it is asked to, until released. */
class Gates {
  readonly #held = new Map<number, { promise: Promise<void>; release: () => void }>();
  readonly #reached = new Map<number, () => void>();
  readonly #reachedPromises = new Map<number, Promise<void>>();

  constructor(indices: readonly number[]) {
    for (const index of indices) {
      let release = (): void => undefined;
      const promise = new Promise<void>((resolve) => (release = resolve));
      this.#held.set(index, { promise, release });
      this.#reachedPromises.set(index, new Promise((resolve) => this.#reached.set(index, resolve)));
    }
  }

  /** The runner's hook: resolves once step `index` may start. */
  async before(index: number): Promise<void> {
    this.#reached.get(index)?.();
    await this.#held.get(index)?.promise;
  }

  /** Resolves once the run waits before step `index`. */
  reached(index: number): Promise<void> {
    return this.#reachedPromises.get(index) ?? Promise.resolve();
  }

  release(index: number): void {
    this.#held.get(index)?.release();
  }

  releaseAll(): void {
    for (const index of this.#held.keys()) this.release(index);
  }
}

async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, name), fullPage: true });
  if (process.env["TANDEM_UPDATE_SCREENSHOTS"] === "1") {
    mkdirSync(join(ROOT, "docs/images"), { recursive: true });
    await page.screenshot({ path: join(ROOT, "docs/images", name), fullPage: true });
  }
}

/**
 * Waits until `count(selector)` satisfies `test` in the page (a JavaScript expression over
 * `count`; run by the browser, so these tests need no DOM types).
 */
async function waitForCount(page: Page, selector: string, test: string): Promise<void> {
  await page.waitForFunction(`((count) => ${test})(document.querySelectorAll(${JSON.stringify(selector)}).length)`);
}

function cellsWhere(page: Page, selector: string): Promise<number> {
  return page.locator(`.cell${selector}`).count();
}

describe("dashboard in headless Chromium", { skip, timeout: 120_000 }, () => {
  let browser: Browser;
  let server: DashboardServer;
  let page: Page;
  let run: Promise<Report>;
  // Steps (src/dashboard/fixtures.ts): 2 patch, 4 wait RolloutComplete, 5 the last advance.
  const gates = new Gates([2, 4, 5]);

  before(async () => {
    server = await startDashboardServer({ host: "127.0.0.1", port: 0, flag: "--listen" });
    const feed = new SimFeed({
      title: "dashboard-fixture",
      describe: (step) => `step ${step.kind}`,
      publish: (state) => {
        server.publish(state);
      },
      beforeStep: (index) => gates.before(index),
    });
    run = runScenario(dashboardScenario(), {
      observer: {
        attach: (cluster, router) => {
          feed.attach(cluster, router);
        },
        stepStarted: (index, step) => feed.stepStarted(index, step),
        stepEnded: (record) => {
          feed.stepEnded(record);
        },
      },
    }).then((report) => {
      feed.ended();
      return report;
    });
    browser = await chromium.launch({ executablePath, args: ["--no-sandbox"], headless: true });
    page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.setDefaultTimeout(DOM_TIMEOUT_MS);
  });

  after(async () => {
    gates.releaseAll();
    await run;
    await browser.close();
    await server.close();
  });

  it("loads and shows 3 groups × (2 prefill + 1 decode) ready cells at revision 1 once Available", async () => {
    await gates.reached(2);
    await page.goto(server.url);
    await page.waitForSelector('#connection[data-state="live"]');
    await waitForCount(page, '.cell[data-state="ready"][data-revision="1"]', "count === 9");
    assert.equal(await page.locator(".grid-row").count(), 3);
    assert.equal(await cellsWhere(page, '[data-role="prefill"]'), 6);
    assert.equal(await cellsWhere(page, '[data-role="decode"]'), 3);
    assert.match(await page.locator(".conditions").innerText(), /Available ✔/);
  });

  it("the rollout step changes the decode cells' revisions, one group at a time, prefill untouched", async () => {
    gates.release(2);
    await gates.reached(4);
    // Mid-rollout: at least one decode has moved to revision 2 and at least one has not.
    await waitForCount(page, '.cell[data-role="decode"][data-revision="2"]', "count > 0");
    await waitForCount(page, '.cell[data-role="decode"][data-revision="1"]', "count > 0");
    assert.equal(await cellsWhere(page, '[data-role="prefill"][data-revision="1"][data-updated="true"]'), 6);
    await screenshot(page, "dashboard-mid-rollout.png");
    gates.release(4);
    await gates.reached(5);
    await waitForCount(page, '.cell[data-role="decode"][data-revision="2"][data-state="ready"]', "count === 3");
    assert.equal(await cellsWhere(page, '[data-role="prefill"][data-revision="1"]'), 6);
    assert.match(await page.locator(".revisions").innerText(), /decode: image vllm:v1 → vllm:v2/);
    assert.ok((await page.locator("#timeline polyline.serving").count()) === 1);
    assert.ok((await page.locator("#timeline .mark").count()) > 0);
    await screenshot(page, "dashboard-rollout-complete.png");
  });

  it("is keyboard-navigable: the grid takes focus, arrows move between cells", async () => {
    await page.locator('.cell[tabindex="0"]').first().focus();
    const at = async (): Promise<string> => {
      const focused = page.locator(":focus");
      return `${await focused.getAttribute("data-row")}/${await focused.getAttribute("data-column")}`;
    };
    assert.equal(await at(), "0/0");
    await page.keyboard.press("ArrowRight");
    await page.keyboard.press("ArrowDown");
    assert.equal(await at(), "1/1");
    await page.keyboard.press("End");
    assert.equal(await at(), "1/2");
    assert.match(
      (await page.locator(":focus").getAttribute("aria-label")) ?? "",
      /group 1 decode-0, ready, revision 2/,
    );
  });

  it("the stream reconnects after a dropped connection and catches up with what it missed", async () => {
    server.dropClients();
    // The scenario ends while the page may be disconnected: the reconnect brings the full state.
    gates.release(5);
    await page.waitForSelector('#connection[data-connects="2"][data-state="live"]');
    await page.locator("#step", { hasText: "· ended" }).waitFor();
    assert.equal((await run).verdict, "pass");
  });

  it("draws only the rows in view of 100 groups × 3 roles, and scrolling brings the last group in", async () => {
    server.publish(largeState(100));
    await page.locator(".serving h2", { hasText: "default/big" }).waitFor();
    const rows = await page.locator(".grid-row").count();
    assert.ok(rows > 0 && rows < 60, `${rows} rows in the DOM`);
    // PageDown moves ten groups: the grid scrolls and draws the rows that come into view.
    await page.locator('.cell[tabindex="0"]').first().focus();
    for (let press = 0; press < 10; press++) await page.keyboard.press("PageDown");
    await page.waitForSelector('.grid-row[data-group="99"]');
    assert.equal(await page.locator(":focus").getAttribute("data-row"), "99");
    assert.ok((await page.locator(".grid-row").count()) < 60);
    assert.equal(await page.locator('.grid-row[data-group="0"]').count(), 0, "rows scrolled away leave the DOM");
  });

  it("the timeline zooms by dragging across it and with the keyboard, keeps the zoom as states arrive, and resets", async () => {
    server.publish(timelineState(100));
    const range = page.locator("#zoom-range");
    await page.waitForSelector('#zoom-range[data-zoomed="false"][data-start="0"][data-end="100"]');
    // No router reported from 40 s to 49 s: the request lines break there (two runs), they do not drop to zero.
    assert.equal(((await page.locator("#timeline path.ok").getAttribute("d")) ?? "").split("M").length - 1, 2);
    assert.equal(await page.locator("#request-sources").innerText(), "requests from 1 of 2 routers");
    assert.ok(await page.locator("#zoom-reset").isDisabled());
    // Drag from 20 s to 60 s of the plot (the SVG is 1000 wide, the plot between x 40 and 950).
    const box = await page.locator("#timeline").boundingBox();
    assert.ok(box !== null);
    const screenX = (seconds: number): number => box.x + ((40 + (seconds / 100) * 910) / 1000) * box.width;
    await page.mouse.move(screenX(20), box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(screenX(40), box.y + box.height / 2, { steps: 3 });
    await page.mouse.move(screenX(60), box.y + box.height / 2, { steps: 3 });
    await page.mouse.up();
    await page.waitForSelector('#zoom-range[data-zoomed="true"][data-start="20"][data-end="60"]');
    assert.ok(!(await page.locator("#zoom-reset").isDisabled()));
    // Live states keep the range chosen.
    server.publish(timelineState(120));
    await page.locator("#marks li", { hasText: "at 120" }).waitFor();
    assert.deepEqual(await zoomRange(), ["true", "20", "60"]);
    // The keyboard: → moves a quarter of the range, − zooms out around it, + in, Esc resets.
    await page.locator("#timeline").focus();
    await page.keyboard.press("ArrowRight");
    assert.deepEqual(await zoomRange(), ["true", "30", "70"]);
    await page.keyboard.press("-");
    assert.deepEqual(await zoomRange(), ["true", "10", "90"]);
    await page.keyboard.press("+");
    assert.deepEqual(await zoomRange(), ["true", "30", "70"]);
    await page.keyboard.press("Escape");
    assert.deepEqual(await zoomRange(), ["false", "0", "120"]);
    await page.keyboard.press("+");
    assert.deepEqual(await zoomRange(), ["true", "30", "90"]);
    await page.locator("#zoom-reset").click();
    assert.deepEqual(await zoomRange(), ["false", "0", "120"]);
    assert.equal(await range.innerText(), "00:00:00–00:02:00");

    async function zoomRange(): Promise<string[]> {
      return Promise.all(
        ["data-zoomed", "data-start", "data-end"].map(async (name) => (await range.getAttribute(name)) ?? ""),
      );
    }
  });
});

/**
 * One group, and a timeline of `seconds` points a second: 10 requests/s ok, none reported from
 * 40 s to 49 s (one router of two reports), two marks.
 */
function timelineState(seconds: number): unknown {
  const state = largeState(1) as { timeline: unknown };
  const points = Array.from({ length: seconds + 1 }, (_, t) => ({
    t,
    serving: 1,
    floor: 0,
    requests: t >= 40 && t < 50 ? undefined : { ok: 10, failed: t % 7 === 0 ? 1 : 0, cut: 0 },
  }));
  return {
    ...state,
    timeline: {
      points,
      marks: [
        { t: 10, label: "step one" },
        { t: seconds, label: `at ${seconds}` },
      ],
      requestSources: { reporting: 1, known: 2 },
    },
  };
}

/** A synthetic state of one ModelServing with `groups` groups of 3 single-instance roles. */
function largeState(groups: number): unknown {
  const cell = { instance: 0, state: "ready", revision: "big-1", revisionNumber: 1, updated: true, surge: false };
  const full = { ...cell, held: false, pods: { live: 1, ready: 1, expected: 1 }, awaitingRouters: [] };
  const roles = ["prefill", "decode", "router"];
  return {
    source: { kind: "simulated", title: "large" },
    step: "synthetic",
    seconds: 0,
    ended: true,
    snapshot: {
      nowMs: 0,
      modelServings: [
        {
          namespace: "default",
          name: "big",
          strategy: "ServingGroupRollingUpdate",
          paused: false,
          replicas: groups,
          servingGroups: groups,
          floorGroups: groups - 1,
          updateRevision: "big-1",
          updateRevisionNumber: 1,
          currentRevision: "big-1",
          roles: roles.map((name) => ({ name, updated: groups, total: groups, maxSkew: undefined })),
          groups: Array.from({ length: groups }, (_, group) => ({
            group,
            surge: false,
            partitioned: false,
            roles: Object.fromEntries(roles.map((role) => [role, [full]])),
          })),
          conditions: [],
          revisions: [],
          problem: undefined,
        },
      ],
    },
    timeline: { points: [], marks: [], requestSources: undefined },
  };
}
