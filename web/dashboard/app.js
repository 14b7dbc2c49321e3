// The Tandem dashboard page: reads the server's state stream (/events, Server-Sent Events) and
// draws it. Read-only, no build step, no dependencies. The state's shape is DashboardState in
// src/dashboard/state.ts. The grid is virtualised (only rows in view are in the DOM) and is a
// keyboard grid: Tab enters it, arrows move, Home/End, PageUp/PageDown; every state is a symbol
// and a class as well as a colour.
"use strict";

const ROW_HEIGHT = 28;
const OVERSCAN_ROWS = 6;
const SYMBOLS = {
  ready: "●",
  starting: "◐",
  pending: "○",
  draining: "↓",
  terminating: "✝",
  failed: "✕",
  unknown: "?",
};

/** The latest state from the server, and per ModelServing what its grid shows. */
let latest;
const grids = new Map();

function element(tag, attributes = {}, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function clock(seconds) {
  const whole = Math.floor(seconds);
  const pad = (value) => String(value).padStart(2, "0");
  return `${pad(Math.floor(whole / 3600))}:${pad(Math.floor(whole / 60) % 60)}:${pad(whole % 60)}`;
}

// ---------------------------------------------------------------------------------------------
// The stream

function connect() {
  const connection = document.getElementById("connection");
  const source = new EventSource("/events");
  source.addEventListener("open", () => {
    connection.dataset.state = "live";
    connection.dataset.connects = String(Number(connection.dataset.connects) + 1);
    connection.textContent = "live";
  });
  source.addEventListener("error", () => {
    // EventSource reconnects by itself (the server asks for 1 s), sending Last-Event-ID.
    connection.dataset.state = "reconnecting";
    connection.textContent = "reconnecting…";
  });
  source.addEventListener("state", (event) => {
    latest = JSON.parse(event.data);
    render(latest);
  });
}

function render(state) {
  document.getElementById("title").textContent =
    `· ${state.source.title} (${state.source.kind === "simulated" ? "simulated cluster" : "cluster"})`;
  document.getElementById("clock").textContent =
    `t=${clock(state.seconds)}${state.source.kind === "simulated" ? " simulated" : ""}`;
  document.getElementById("step").textContent = state.ended ? `${state.step} · ended` : state.step;
  const container = document.getElementById("servings");
  const keys = new Set();
  for (const view of state.snapshot.modelServings) {
    const key = `${view.namespace}/${view.name}`;
    keys.add(key);
    let grid = grids.get(key);
    if (grid === undefined) {
      grid = createServing(key);
      grids.set(key, grid);
      container.append(grid.section);
    }
    updateServing(grid, view);
  }
  for (const [key, grid] of grids) {
    if (keys.has(key)) continue;
    grid.section.remove();
    grids.delete(key);
  }
  if (state.snapshot.modelServings.length === 0 && container.querySelector(".empty") === null)
    container.append(element("p", { class: "empty" }, "No ModelServing yet."));
  else if (state.snapshot.modelServings.length > 0) container.querySelector(".empty")?.remove();
  renderTimeline(state.timeline);
}

// ---------------------------------------------------------------------------------------------
// One ModelServing: heading, conditions, progress, revisions, grid

function createServing(key) {
  const section = element("section", { class: "serving", "data-key": key, "aria-label": `ModelServing ${key}` });
  const heading = element("h2");
  const meta = element("p", { class: "meta" });
  const problem = element("p", { class: "problem", role: "alert" });
  const conditions = element("ul", { class: "conditions", "aria-label": "Conditions" });
  const progress = element("div", { class: "progress", "aria-label": "Update progress by role" });
  const gridBox = element("div", { class: "grid", role: "grid", tabindex: -1, "aria-label": `Units of ${key}` });
  const head = element("div", { class: "grid-head", role: "row", "aria-rowindex": 1 });
  const body = element("div", { class: "grid-body", role: "rowgroup" });
  gridBox.append(head, body);
  const revisions = element("ol", { class: "revisions", "aria-label": "Revision history" });
  section.append(heading, meta, problem, conditions, progress, gridBox, element("h3", {}, "Revisions"), revisions);
  const grid = { key, section, heading, meta, problem, conditions, progress, gridBox, head, body, revisions };
  grid.view = undefined;
  grid.active = { row: 0, column: 0 };
  gridBox.addEventListener("scroll", () => drawRows(grid));
  gridBox.addEventListener("keydown", (event) => onGridKey(grid, event));
  gridBox.addEventListener("focusin", (event) => {
    const cell = event.target.closest(".cell");
    if (cell === null) return;
    grid.active = { row: Number(cell.dataset.row), column: Number(cell.dataset.column) };
  });
  return grid;
}

function updateServing(grid, view) {
  grid.view = view;
  grid.heading.textContent = `ModelServing ${view.namespace}/${view.name}`;
  grid.meta.textContent =
    `${view.strategy}${view.paused ? " (paused)" : ""} · ${view.replicas} groups · ` +
    `serving ${view.servingGroups}, floor ${view.floorGroups} · update revision ${view.updateRevisionNumber}`;
  grid.problem.textContent = view.problem ?? "";
  grid.conditions.replaceChildren(
    ...view.conditions.map((condition) =>
      element(
        "li",
        { "data-status": condition.status, "data-type": condition.type, class: isTrouble(condition) ? "trouble" : "" },
        `${condition.type} ${condition.status === "True" ? "✔" : "✘"} ${condition.reason}: ${condition.message}`,
      ),
    ),
  );
  grid.progress.replaceChildren(...view.roles.flatMap(progressRow));
  grid.revisions.replaceChildren(...view.revisions.map(revisionItem));
  grid.columns = view.roles.map((role) => ({
    role: role.name,
    width: Math.max(1, ...view.groups.map((row) => (row.roles[role.name] ?? []).length)),
  }));
  grid.head.replaceChildren(
    element("span", { class: "gcol", role: "columnheader" }, "group"),
    ...grid.columns.map((column) =>
      element(
        "span",
        { class: "rcol", role: "columnheader", style: `width:${column.width * 2.9 + 1}rem` },
        column.role,
      ),
    ),
  );
  grid.gridBox.setAttribute("aria-rowcount", String(view.groups.length + 1));
  grid.body.style.height = `${view.groups.length * ROW_HEIGHT}px`;
  drawRows(grid);
}

/** A condition that asks for attention: not Available, or a blocked rollout, an unreadable revision. */
function isTrouble(condition) {
  if (condition.type === "Available") return condition.status === "False";
  return condition.type !== "Progressing" && condition.status === "True";
}

function progressRow(role) {
  const fraction = role.total === 0 ? 0 : role.updated / role.total;
  const bar = element("div", {
    class: "bar",
    role: "progressbar",
    "aria-valuemin": 0,
    "aria-valuemax": role.total,
    "aria-valuenow": role.updated,
    "aria-label": `${role.name} updated`,
  });
  bar.append(element("div", { class: "fill", style: `width:${(fraction * 100).toFixed(1)}%` }));
  if (role.maxSkew !== undefined) {
    const skew = Math.min(100, fraction * 100 + Number.parseInt(role.maxSkew, 10));
    bar.append(element("div", { class: "skew", style: `left:${skew}%`, title: `maxSkew ${role.maxSkew}` }));
  }
  const text = `${role.updated}/${role.total} updated${role.maxSkew === undefined ? "" : ` · maxSkew ${role.maxSkew}`}`;
  return [element("span", {}, role.name), bar, element("span", {}, text)];
}

function revisionItem(entry) {
  const flags = [entry.current ? "current" : "", entry.update ? "update" : ""].filter((flag) => flag !== "");
  const changes = entry.changes.length === 0 ? "" : ` — ${entry.changes.join("; ")}`;
  return element(
    "li",
    { class: entry.update ? "update" : "", "data-number": entry.number },
    `revision ${entry.number} ${entry.name}${flags.length === 0 ? "" : ` (${flags.join(", ")})`}${changes}`,
  );
}

// ---------------------------------------------------------------------------------------------
// The virtualised grid

/** The cells of a row, in column order: role by role, instance by instance (gaps for missing ones). */
function rowCells(grid, row) {
  return grid.columns.flatMap((column) => {
    const cells = row.roles[column.role] ?? [];
    return Array.from({ length: column.width }, (_, index) => ({ role: column.role, cell: cells[index] }));
  });
}

function drawRows(grid) {
  const view = grid.view;
  if (view === undefined) return;
  const headHeight = grid.head.offsetHeight;
  const top = Math.max(0, grid.gridBox.scrollTop - headHeight);
  const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN_ROWS);
  const visible = Math.ceil(grid.gridBox.clientHeight / ROW_HEIGHT) + 2 * OVERSCAN_ROWS;
  const last = Math.min(view.groups.length, first + visible);
  const rows = [];
  for (let index = first; index < last; index++) rows.push(drawRow(grid, view.groups[index], index));
  // Redrawing replaces the focused cell: focus moves to its replacement (or to the grid while
  // the active cell is scrolled away), so the keyboard keeps working through updates and scrolls.
  const hadFocus = grid.gridBox.contains(document.activeElement);
  grid.body.replaceChildren(...rows);
  const active = grid.body.querySelector(activeSelector(grid));
  if (hadFocus) (active ?? grid.gridBox).focus({ preventScroll: true });
  // Keep one tabbable cell (roving tabindex) in the DOM when the active row is scrolled away.
  if (active === null) grid.body.querySelector(".cell")?.setAttribute("tabindex", "0");
}

function activeSelector(grid) {
  return `.cell[data-row="${grid.active.row}"][data-column="${grid.active.column}"]`;
}

function drawRow(grid, row, index) {
  const line = element("div", {
    class: `grid-row${row.surge ? " surge" : ""}`,
    role: "row",
    "aria-rowindex": index + 2,
    "data-group": row.group,
    style: `top:${index * ROW_HEIGHT}px`,
  });
  line.append(element("span", { class: "gcol", role: "rowheader" }, String(row.group)));
  let column = 0;
  for (const spec of grid.columns) {
    const box = element("span", { class: "rcol", role: "presentation", style: `width:${spec.width * 2.9 + 1}rem` });
    const cells = rowCells(grid, row).filter((entry) => entry.role === spec.role);
    for (const entry of cells) {
      box.append(drawCell(grid, row, entry, index, column));
      column += 1;
    }
    line.append(box);
  }
  return line;
}

function drawCell(grid, row, entry, rowIndex, column) {
  const active = grid.active.row === rowIndex && grid.active.column === column;
  const attributes = { role: "gridcell", tabindex: active ? 0 : -1, "data-row": rowIndex, "data-column": column };
  if (entry.cell === undefined) return element("span", { ...attributes, class: "cell gap", "aria-label": "none" }, "");
  const cell = entry.cell;
  const classes = ["cell", `state-${cell.state}`];
  if (cell.updated) classes.push("updated");
  if (cell.surge || row.surge) classes.push("surge");
  if (cell.held) classes.push("held");
  const awaiting = cell.awaitingRouters.length === 0 ? "" : "…";
  const words = [
    `group ${row.group} ${entry.role}-${cell.instance}`,
    cell.state,
    `revision ${cell.revisionNumber}`,
    cell.updated ? "at the update revision" : "not updated",
    cell.surge || row.surge ? "surge" : "",
    cell.held ? "held by a partition" : "",
    `${cell.pods.ready}/${cell.pods.expected} pods ready`,
    cell.awaitingRouters.length === 0 ? "" : `awaiting routers ${cell.awaitingRouters.join(", ")}`,
  ].filter((word) => word !== "");
  const node = element("span", {
    ...attributes,
    class: classes.join(" "),
    "aria-label": words.join(", "),
    title: words.join("\n"),
    "data-group": row.group,
    "data-role": entry.role,
    "data-instance": cell.instance,
    "data-state": cell.state,
    "data-revision": cell.revisionNumber,
    "data-updated": cell.updated,
  });
  node.append(SYMBOLS[cell.state] ?? "?", element("span", { class: "rev" }, `${cell.revisionNumber}${awaiting}`));
  return node;
}

function onGridKey(grid, event) {
  const view = grid.view;
  if (view === undefined) return;
  const columns = grid.columns.reduce((sum, column) => sum + column.width, 0);
  const moves = {
    ArrowUp: [-1, 0],
    ArrowDown: [1, 0],
    ArrowLeft: [0, -1],
    ArrowRight: [0, 1],
    PageUp: [-10, 0],
    PageDown: [10, 0],
  };
  let { row, column } = grid.active;
  if (event.key in moves) {
    row += moves[event.key][0];
    column += moves[event.key][1];
  } else if (event.key === "Home") column = 0;
  else if (event.key === "End") column = columns - 1;
  else return;
  event.preventDefault();
  grid.active = {
    row: Math.max(0, Math.min(view.groups.length - 1, row)),
    column: Math.max(0, Math.min(columns - 1, column)),
  };
  focusActive(grid);
}

function focusActive(grid) {
  const headHeight = grid.head.offsetHeight;
  const rowTop = grid.active.row * ROW_HEIGHT + headHeight;
  const box = grid.gridBox;
  if (rowTop < box.scrollTop + headHeight) box.scrollTop = rowTop - headHeight;
  else if (rowTop + ROW_HEIGHT > box.scrollTop + box.clientHeight)
    box.scrollTop = rowTop + ROW_HEIGHT - box.clientHeight;
  drawRows(grid);
  grid.body.querySelector(activeSelector(grid))?.focus({ preventScroll: true });
}

// ---------------------------------------------------------------------------------------------
// The timeline: an SVG of capacity (left axis, groups) and request rates (right axis, per second)

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 1000;
const HEIGHT = 220;
const PAD = { left: 40, right: 50, top: 18, bottom: 20 };

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

// Zoom: undefined follows the window selector; { start, end } (seconds) holds the range chosen by
// dragging across the chart or with the keyboard (+ − ← → on the focused chart), until reset.
let zoom;
// A drag in progress, { from, to } in seconds, drawn as a band.
let drag;
// The range last drawn, to turn pointer positions into seconds.
let view = { start: 0, span: 1, first: 0, last: 0 };
const MIN_ZOOM_SECONDS = 2;
const PLOT_WIDTH = WIDTH - PAD.left - PAD.right;

/** The seconds shown: the zoomed range, else the window selector's last N seconds (or all). */
function visibleRange(points) {
  const first = points[0]?.t ?? 0;
  const last = points.length === 0 ? 0 : points[points.length - 1].t;
  if (zoom !== undefined) return { first, last, start: zoom.start, end: zoom.end };
  const windowSeconds = Number(document.getElementById("window").value);
  return { first, last, start: windowSeconds === 0 ? first : Math.max(0, last - windowSeconds), end: last };
}

/** A path through the points where `value` is defined; an undefined value breaks it (a gap, not a zero). */
function gappedPath(points, value, x, y) {
  let d = "";
  let drawing = false;
  for (const point of points) {
    const v = value(point);
    if (v === undefined) {
      drawing = false;
      continue;
    }
    d += `${drawing ? "L" : "M"}${x(point.t).toFixed(1)},${y(v).toFixed(1)} `;
    drawing = true;
  }
  return d.trim();
}

function renderTimeline(timeline) {
  const chart = document.getElementById("timeline");
  const range = visibleRange(timeline.points);
  const { start, end } = range;
  const points = timeline.points.filter((point) => point.t >= start && point.t <= end);
  const span = Math.max(1, end - start);
  view = { start, span, first: range.first, last: range.last };
  const x = (t) => PAD.left + ((t - start) / span) * PLOT_WIDTH;
  const groups = Math.max(1, ...points.map((point) => Math.max(point.serving, point.floor)));
  const rate = Math.max(
    1,
    ...points.map((p) => Math.max(p.requests?.ok ?? 0, p.requests?.failed ?? 0, p.requests?.cut ?? 0)),
  );
  const yGroups = (value) => HEIGHT - PAD.bottom - (value / groups) * (HEIGHT - PAD.top - PAD.bottom);
  const yRate = (value) => HEIGHT - PAD.bottom - (value / rate) * (HEIGHT - PAD.top - PAD.bottom);
  const line = (value, y, attributes) =>
    svg("polyline", {
      fill: "none",
      "stroke-width": 2,
      "vector-effect": "non-scaling-stroke",
      ...attributes,
      points: points.map((point) => `${x(point.t).toFixed(1)},${y(value(point)).toFixed(1)}`).join(" "),
    });
  const rateLine = (outcome, attributes) =>
    svg("path", {
      fill: "none",
      "stroke-width": 2,
      "vector-effect": "non-scaling-stroke",
      class: outcome,
      ...attributes,
      d: gappedPath(points, (p) => p.requests?.[outcome], x, yRate),
    });
  const children = [
    svg("line", {
      x1: PAD.left,
      x2: WIDTH - PAD.right,
      y1: HEIGHT - PAD.bottom,
      y2: HEIGHT - PAD.bottom,
      stroke: "#999",
    }),
    axisLabel(4, yGroups(groups) + 4, `${groups} groups`),
    axisLabel(WIDTH - PAD.right + 4, yRate(rate) + 4, `${Math.round(rate)}/s`),
    axisLabel(PAD.left, HEIGHT - 4, clock(start)),
    axisLabel(WIDTH - PAD.right - 50, HEIGHT - 4, clock(end)),
    line((p) => p.floor, yGroups, { stroke: "#1d1d1f", "stroke-dasharray": "6 4", class: "floor" }),
    line((p) => p.serving, yGroups, { stroke: "#2e7d32", class: "serving" }),
  ];
  if (points.some((point) => point.requests !== undefined))
    children.push(
      rateLine("ok", { stroke: "#0b63ce", "stroke-width": 1.5 }),
      rateLine("failed", { stroke: "#c62828", "stroke-dasharray": "2 3" }),
      rateLine("cut", { stroke: "#8e24aa", "stroke-dasharray": "8 3 2 3" }),
    );
  children.push(...markNodes(timeline.marks, start, end, x), ...zoomBand(x));
  chart.replaceChildren(...children);
  renderZoomState(start, end, timeline.requestSources);
  const list = document.getElementById("marks");
  list.replaceChildren(
    ...timeline.marks
      .slice(-50)
      .reverse()
      .map((mark) => element("li", {}, `${clock(mark.t)} ${mark.label}`)),
  );
}

/** Each event mark in [start, end]: a triangle with its text as a tooltip, and a thin line down. */
function markNodes(marks, start, end, x) {
  return marks
    .filter((entry) => entry.t >= start && entry.t <= end)
    .flatMap((mark) => {
      const marker = svg("path", { d: `M${x(mark.t) - 5},2 h10 l-5,8 z`, fill: "#555", class: "mark" });
      const title = svg("title", {});
      title.textContent = `${clock(mark.t)} ${mark.label}`;
      marker.append(title);
      return [marker, svg("line", { x1: x(mark.t), x2: x(mark.t), y1: 10, y2: HEIGHT - PAD.bottom, stroke: "#ccc" })];
    });
}

/** The band of a drag in progress (none without one). */
function zoomBand(x) {
  if (drag === undefined) return [];
  const [from, to] = [Math.min(drag.from, drag.to), Math.max(drag.from, drag.to)];
  return [
    svg("rect", {
      class: "zoom-band",
      x: x(from),
      width: Math.max(1, x(to) - x(from)),
      y: PAD.top,
      height: HEIGHT - PAD.top - PAD.bottom,
    }),
  ];
}

/** The range shown in words, the reset button's state, and how many routers report requests. */
function renderZoomState(start, end, requestSources) {
  const range = document.getElementById("zoom-range");
  range.dataset.zoomed = String(zoom !== undefined);
  range.dataset.start = String(Math.round(start));
  range.dataset.end = String(Math.round(end));
  range.textContent = `${clock(start)}–${clock(end)}${zoom === undefined ? "" : " (zoomed)"}`;
  document.getElementById("zoom-reset").disabled = zoom === undefined;
  const sources = document.getElementById("request-sources");
  sources.textContent =
    requestSources === undefined || requestSources.reporting === requestSources.known
      ? ""
      : `requests from ${requestSources.reporting} of ${requestSources.known} routers`;
}

function redrawTimeline() {
  if (latest !== undefined) renderTimeline(latest.timeline);
}

/** Zooms to [start, end] (seconds), kept within the timeline and at least MIN_ZOOM_SECONDS wide; all of it: reset. */
function zoomTo(start, end) {
  const width = Math.max(MIN_ZOOM_SECONDS, end - start);
  if (width >= view.last - view.first) zoom = undefined;
  else {
    const from = Math.min(Math.max(view.first, start), view.last - width);
    zoom = { start: from, end: from + width };
  }
  redrawTimeline();
}

/** The second under a pointer on the chart, within the range drawn. */
function secondsAt(event) {
  const chart = document.getElementById("timeline");
  const box = chart.getBoundingClientRect();
  const svgX = ((event.clientX - box.left) / box.width) * WIDTH;
  const fraction = Math.min(1, Math.max(0, (svgX - PAD.left) / PLOT_WIDTH));
  return view.start + fraction * view.span;
}

function setUpZoom() {
  const chart = document.getElementById("timeline");
  chart.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    chart.setPointerCapture(event.pointerId);
    const at = secondsAt(event);
    drag = { from: at, to: at };
  });
  chart.addEventListener("pointermove", (event) => {
    if (drag === undefined) return;
    drag.to = secondsAt(event);
    redrawTimeline();
  });
  const finish = (event) => {
    if (drag === undefined) return;
    const chosen = drag;
    drag = undefined;
    chosen.to = secondsAt(event);
    // A click (no real drag) zooms nothing.
    if (Math.abs(chosen.to - chosen.from) / view.span < 0.01) redrawTimeline();
    else zoomTo(Math.min(chosen.from, chosen.to), Math.max(chosen.from, chosen.to));
  };
  chart.addEventListener("pointerup", finish);
  chart.addEventListener("pointercancel", () => {
    drag = undefined;
    redrawTimeline();
  });
  chart.addEventListener("keydown", (event) => {
    const { start, span } = view;
    const keys = {
      "+": () => zoomTo(start + span / 4, start + (3 * span) / 4),
      "=": () => zoomTo(start + span / 4, start + (3 * span) / 4),
      "-": () => zoomTo(start - span / 2, start + (3 * span) / 2),
      // Moving needs a zoomed range; without one the arrows keep scrolling the page.
      ...(zoom === undefined
        ? {}
        : {
            ArrowLeft: () => zoomTo(start - span / 4, start + (3 * span) / 4),
            ArrowRight: () => zoomTo(start + span / 4, start + (5 * span) / 4),
          }),
      Escape: resetZoom,
      0: resetZoom,
    };
    const action = keys[event.key];
    if (action === undefined) return;
    event.preventDefault();
    action();
  });
  document.getElementById("zoom-reset").addEventListener("click", resetZoom);
}

function resetZoom() {
  zoom = undefined;
  redrawTimeline();
}

function axisLabel(x, y, text) {
  const label = svg("text", { x, y, "font-size": 11, fill: "#666" });
  label.textContent = text;
  return label;
}

// Choosing a window follows the live end again.
document.getElementById("window").addEventListener("change", resetZoom);
setUpZoom();
connect();
