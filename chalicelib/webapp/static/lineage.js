// Lineage drawn as a graph: nodes in columns by hop (upstream left, downstream right), edges as curves.
// Each node is a link (datasets open their page), so the picture is keyboard-navigable.
import { svg } from "./dom.js";

const W = 190, H = 46, GAP_X = 70, GAP_Y = 24, PAD = 16;

export function layers(graph) {
  // Longest-path layering from the sources, so every edge points right.
  const incoming = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const e of graph.edges) if (incoming.has(e.target) && incoming.has(e.source)) incoming.get(e.target).push(e.source);
  const level = new Map();
  const visit = (id, seen = new Set()) => {
    if (level.has(id)) return level.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    const parents = incoming.get(id) || [];
    const lv = parents.length ? Math.max(...parents.map((p) => visit(p, seen) + 1)) : 0;
    level.set(id, lv);
    return lv;
  };
  graph.nodes.forEach((n) => visit(n.id));
  return level;
}

export function drawLineage(graph, rootId) {
  const level = layers(graph);
  const columns = [];
  for (const n of graph.nodes) (columns[level.get(n.id)] ||= []).push(n);
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((n, y) => pos.set(n.id, { x: PAD + x * (W + GAP_X), y: PAD + y * (H + GAP_Y) })));
  const width = PAD * 2 + Math.max(1, columns.length) * (W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(1, ...columns.map((c) => c.length)) * (H + GAP_Y) - GAP_Y;
  const edges = graph.edges.filter((e) => pos.has(e.source) && pos.has(e.target)).map((e) => {
    const a = pos.get(e.source), b = pos.get(e.target);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mid = (x1 + x2) / 2;
    return svg("path", { class: "edge", d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" });
  });
  const nodes = graph.nodes.map((n) => {
    const p = pos.get(n.id);
    const label = (n.name || n.id).slice(0, 26);
    const g = svg("g", { class: "node" + (n.id === rootId ? " root" : ""), transform: `translate(${p.x},${p.y})` },
      svg("rect", { width: W, height: H, rx: 6 }),
      svg("text", { x: 10, y: 19 }, label),
      svg("text", { x: 10, y: 36, class: "kind" }, n.type));
    const href = n.type === "DATASET" && n.id !== rootId ? `/knowledge/datasets/${encodeURIComponent(n.id)}` : null;
    return href ? svg("a", { href, "aria-label": `${n.type} ${n.name || n.id}` }, g) : g;
  });
  return svg("svg", { class: "lineage", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `Lineage graph: ${graph.nodes.length} nodes, ${graph.edges.length} edges` },
  svg("title", {}, "Lineage graph"),
  svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
    svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#57606a" }))),
  ...edges, ...nodes);
}
