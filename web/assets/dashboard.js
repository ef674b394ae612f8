// The dashboard (admin key): process status, tweets, index size and ingest rate, and per key
// the usage over the last hour / day / week / month, allowed versus limited, as a chart.
import { drawChart } from './chart.js';
import {
  apiGet, bindKeyInput, el, formatBytes, formatNumber, formatSeconds, showMessage,
} from './common.js';

const message = document.getElementById('message');
const statusList = document.getElementById('status');
const keySelect = document.getElementById('usage-key');
const ranges = document.getElementById('ranges');
const chartBox = document.getElementById('chart');
const caption = document.getElementById('chart-caption');
const totalsList = document.getElementById('usage-totals');
const limitedTable = document.getElementById('limited-by');
const keysTable = document.getElementById('keys');
const keyInput = document.getElementById('api-key');
const getKey = bindKeyInput(keyInput, '', 'tweetsearch.admin_key');

// Each range: how far back, and the bucket size asked for.
const RANGES = {
  hour: { from: '-1h', resolution: '1m', label: 'the last hour, per minute' },
  day: { from: '-24h', resolution: '5m', label: 'the last day, per 5 minutes' },
  week: { from: '-7d', resolution: '1h', label: 'the last week, per hour' },
  month: { from: '-30d', resolution: '1h', label: 'the last 30 days, per hour' },
};
const SERIES = [
  { name: 'served', label: 'Allowed', css: 'allowed' },
  { name: 'limited', label: 'Limited', css: 'limited' },
  { name: 'rejected', label: 'Rejected (bad input)', css: 'rejected' },
  { name: 'failed', label: 'Failed', css: 'failed' },
];
let range = 'hour';
let keys = [];

function cards(list, entries) {
  list.replaceChildren(...entries.map(([term, value, id]) => el('div', { class: 'card' },
    el('dt', {}, term), el('dd', id ? { 'data-field': id } : {}, value))));
}

async function refreshStatus() {
  const { body } = await apiGet('/v1/stats', {}, getKey());
  const p = body.process || {};
  const rate = p.ingest_per_second || { last_10s: 0, last_60s: 0 };
  cards(statusList, [
    ['Status', `${p.status} · ${p.shape}`, 'status'],
    ['Up for', formatSeconds(p.uptime_s || 0), 'uptime'],
    ['Tweets indexed', formatNumber(body.indexed_documents), 'tweets'],
    ['Index memory', formatBytes(body.index_memory_bytes), 'index-bytes'],
    ['Stored on disk', formatBytes(body.storage_disk_bytes), 'disk-bytes'],
    ['Ingest rate', `${formatNumber(rate.last_10s)}/s (10 s) · ${formatNumber(rate.last_60s)}/s (1 min)`,
      'ingest-rate'],
    ['Tweets ingested since start', formatNumber(body.tweets_ingested), 'ingested'],
    ['Index segments', formatNumber(body.sealed_segments), 'segments'],
  ]);
}

async function loadKeys() {
  const { body } = await apiGet('/v1/admin/keys', {}, getKey());
  keys = body.keys.filter((k) => !k.revoked);
  const chosen = keySelect.value || 'all';
  keySelect.replaceChildren(
    el('option', { value: 'all' }, 'All keys'),
    el('option', { value: 'anonymous' }, 'Calls without a valid key'),
    ...keys.map((k) => el('option', { value: k.id }, `${k.prefix}… · ${k.owner} (${k.tier})`)));
  keySelect.value = [...keySelect.options].some((o) => o.value === chosen) ? chosen : 'all';
}

function usageParams(key) {
  const r = RANGES[range];
  return { key, from: r.from, resolution: r.resolution };
}

async function refreshUsage() {
  const key = keySelect.value;
  const label = keySelect.selectedOptions[0].textContent;
  const shownRange = range;
  const { body } = await apiGet('/v1/usage', usageParams(key), getKey());
  // A slower answer for a key or range no longer chosen must not replace the current one.
  if (key !== keySelect.value || shownRange !== range) return;
  const points = body.points.map((p) => ({ start: new Date(p.start), values: p }));
  drawChart(chartBox, points, SERIES);
  const t = body.totals;
  caption.textContent = `Requests of ${label} over ${RANGES[shownRange].label}: ` +
    `${formatNumber(t.requests)} in all.`;
  const latency = t.search_latency_ms;
  cards(totalsList, [
    ['Allowed', formatNumber(t.served), 'allowed'],
    ['Limited', formatNumber(t.limited), 'limited'],
    ['Rejected', formatNumber(t.rejected), 'rejected'],
    ['Failed', formatNumber(t.failed), 'failed'],
    ['Searches', formatNumber(t.searches), 'searches'],
    ['Search latency p50 / p99',
      latency ? `${latency.p50.toFixed(2)} / ${latency.p99.toFixed(2)} ms` : '–', 'latency'],
  ]);
  const rules = Object.entries(t.limited_by);
  limitedTable.hidden = rules.length === 0;
  limitedTable.tBodies[0].replaceChildren(...rules.map(([name, n]) =>
    el('tr', {}, el('td', {}, name), el('td', {}, formatNumber(n)))));
}

async function refreshKeysTable() {
  const rows = [];
  for (const k of keys.slice(0, 50)) {
    const { body } = await apiGet('/v1/usage', usageParams(k.id), getKey());
    const t = body.totals;
    rows.push(el('tr', {}, el('td', {}, `${k.prefix}…`), el('td', {}, k.owner), el('td', {}, k.tier),
      el('td', {}, formatNumber(t.served)), el('td', {}, formatNumber(t.limited)),
      el('td', {}, formatNumber(t.rejected)), el('td', {}, formatNumber(t.failed))));
  }
  keysTable.tBodies[0].replaceChildren(...rows);
}

async function refreshAll(withKeys) {
  if (!getKey()) {
    showMessage(message, 'Enter an API key with the admin scope above (the first one is in ' +
      '<data-dir>/admin.key).', 'info');
    return;
  }
  try {
    if (withKeys) await loadKeys();
    await Promise.all([refreshStatus(), refreshUsage()]);
    await refreshKeysTable();
    showMessage(message, '');
    document.body.dataset.loaded = 'true';
  } catch (error) {
    showMessage(message, error.message);
  }
}

ranges.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-range]');
  if (!button) return;
  range = button.dataset.range;
  for (const b of ranges.querySelectorAll('button')) {
    b.setAttribute('aria-selected', String(b === button));
  }
  refreshAll(false);
});
keySelect.addEventListener('change', () => refreshAll(false));
keyInput.addEventListener('change', () => refreshAll(true));

refreshAll(true);
setInterval(() => refreshAll(false), 10000);
document.body.dataset.ready = 'true';
