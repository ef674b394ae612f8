// A time-series chart drawn as SVG: one line (and a light area) per series, a y axis with
// round gridlines, time labels, a legend, and a tooltip per bucket (SVG <title>).

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 800;
const HEIGHT = 260;
const PAD = { left: 52, right: 12, top: 12, bottom: 28 };

function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// The smallest "round" number (1, 2 or 5 times a power of ten) at or above `v`.
export function niceCeil(v) {
  if (v <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(v));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= v) return step * power;
  }
  return 10 * power;
}

function timeLabel(date, spanSeconds) {
  if (spanSeconds <= 2 * 86400) {
    return date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  }
  return date.toLocaleDateString([], { month: 'short', day: 'numeric' });
}

// Draws into `container` (replacing what was there).
//   points: [{start: Date, values: {name: number}}], oldest first, evenly spaced
//   series: [{name, label, css}] in drawing order (css: a class for colour)
// Returns the <svg> element.
export function drawChart(container, points, series) {
  const chart = svg('svg', {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: 'img',
    class: 'chart-svg',
    'aria-label': `Over time: ${series.map((s) => s.label).join(', ')}`,
  });
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  let max = 0;
  for (const p of points) for (const s of series) max = Math.max(max, p.values[s.name] || 0);
  const top = niceCeil(max);
  const n = Math.max(points.length, 1);
  const x = (i) => PAD.left + (n === 1 ? plotW / 2 : (i * plotW) / (n - 1));
  const y = (v) => PAD.top + plotH - (v / top) * plotH;

  // Gridlines and y labels.
  for (let k = 0; k <= 4; k++) {
    const v = (top * k) / 4;
    chart.append(svg('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(v), y2: y(v),
      class: 'grid' }));
    chart.append(svg('text', { x: PAD.left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' },
      Number.isInteger(v) ? String(v) : v.toFixed(1)));
  }
  // Time labels.
  if (points.length > 0) {
    const span = (points[points.length - 1].start - points[0].start) / 1000;
    const labels = Math.min(6, points.length);
    for (let k = 0; k < labels; k++) {
      const i = labels === 1 ? 0 : Math.round((k * (points.length - 1)) / (labels - 1));
      chart.append(svg('text', { x: x(i), y: HEIGHT - 8, class: 'axis',
        'text-anchor': k === 0 ? 'start' : k === labels - 1 ? 'end' : 'middle' },
      timeLabel(points[i].start, span)));
    }
  }
  // Series: area + line.
  for (const s of series) {
    if (points.length === 0) break;
    const coords = points.map((p, i) => `${x(i).toFixed(1)},${y(p.values[s.name] || 0).toFixed(1)}`);
    const base = y(0).toFixed(1);
    chart.append(svg('path', {
      d: `M${x(0).toFixed(1)},${base} L${coords.join(' L')} L${x(points.length - 1).toFixed(1)},${base} Z`,
      class: `area ${s.css}`,
    }));
    chart.append(svg('path', { d: `M${coords.join(' L')}`, class: `line ${s.css}`,
      'data-series': s.name }));
  }
  // One invisible column per bucket carries its tooltip.
  const column = points.length > 1 ? plotW / (points.length - 1) : plotW;
  points.forEach((p, i) => {
    const rect = svg('rect', { x: x(i) - column / 2, y: PAD.top, width: column, height: plotH,
      class: 'hover' });
    const lines = series.map((s) => `${s.label}: ${p.values[s.name] || 0}`);
    rect.append(svg('title', {}, `${p.start.toLocaleString()}\n${lines.join('\n')}`));
    chart.append(rect);
  });

  const legend = document.createElement('ul');
  legend.className = 'legend';
  for (const s of series) {
    const item = document.createElement('li');
    item.className = s.css;
    item.textContent = s.label;
    legend.append(item);
  }
  container.replaceChildren(legend, chart);
  return chart;
}
