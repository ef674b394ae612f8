// The search page: query, sort, results with highlighted words, "load more" through page
// tokens, the quota left, clear messages for refused requests, above the results the query's
// matches per hour over the week up to the newest tweet of the first page, and "live": a
// stream of the query (GET /v1/stream, Server-Sent Events) that adds new matches on top and
// takes deleted ones away.
import { drawChart } from './chart.js';
import {
  apiGet, bindKeyInput, el, formatNumber, formatSeconds, quotaText, showMessage,
} from './common.js';

const form = document.getElementById('search-form');
const queryInput = document.getElementById('query');
const sortSelect = document.getElementById('sort');
const exactBox = document.getElementById('exact-total');
const liveBox = document.getElementById('live');
const liveStatus = document.getElementById('live-status');
const results = document.getElementById('results');
const more = document.getElementById('more');
const message = document.getElementById('message');
const summary = document.getElementById('summary');
const quota = document.getElementById('quota');
const timeline = document.getElementById('timeline');
const timelineChart = document.getElementById('timeline-chart');
const timelineCaption = document.getElementById('timeline-caption');
let getKey = () => '';
// The query the timeline shows (a new sort or page of it keeps the chart: one count per query).
let charted = null;

// The search on screen: its query, sort, and the token of its next page.
let current = null;
// Counts down to the end of a 429's wait.
let countdown = null;
// The open stream of the query on screen (live), and how many tweets it added.
let live = null;
let liveAdded = 0;

function renderTweet(tweet) {
  const text = el('p', { class: 'text' });
  const pieces = tweet.highlighted_text || [tweet.text];
  pieces.forEach((piece, i) => text.append(i % 2 === 1 ? el('mark', {}, piece) : piece));
  const created = new Date(tweet.created_at);
  const meta = el('div', { class: 'meta' },
    el('span', { class: 'author' }, `@${tweet.user_name || tweet.user_id}`),
    el('time', { datetime: tweet.created_at, title: created.toISOString() },
      created.toLocaleString()),
    el('span', { class: 'likes', title: 'likes' }, `♥ ${formatNumber(tweet.likes)}`));
  return el('li', { class: 'tweet', 'data-id': tweet.tweet_id, 'data-likes': tweet.likes },
    meta, text);
}

const HOUR = 3600 * 1000;

// Charts the matches of `q` per hour over the 7 days up to the newest of `tweets` (the first
// page). A refused count (the quota) hides the chart; the search's message says the rest.
async function drawTimeline(q, tweets) {
  if (charted === q) return;
  charted = q;
  if (tweets.length === 0) {
    timeline.hidden = true;
    return;
  }
  const newest = Math.max(...tweets.map((t) => Date.parse(t.created_at)));
  const params = {
    q,
    granularity: 'hour',
    since: new Date(newest - 7 * 24 * HOUR).toISOString(),
    until: new Date(newest + 1).toISOString(),
  };
  try {
    const { body } = await apiGet('/v1/counts', params, getKey());
    if (charted !== q) return;  // another query was typed meanwhile
    const points = body.counts.map((b) => ({
      start: new Date(b.start), values: { tweets: b.tweet_count },
    }));
    drawChart(timelineChart, points, [{ name: 'tweets', label: 'Matching tweets per hour', css: 'allowed' }]);
    timelineCaption.textContent = `${formatNumber(body.total_tweet_count)} matching tweets in the `
      + 'week up to the newest one shown, per hour';
    timeline.hidden = false;
  } catch (error) {
    if (charted !== q) return;
    timeline.hidden = true;
    charted = null;  // the next search of it tries again
  }
}

function stopLive(why) {
  if (live) live.close();
  live = null;
  liveStatus.hidden = !why;
  liveStatus.textContent = why || '';
}

// Follows the query on screen: new matches go on top, deletes leave. EventSource reconnects by
// itself after a dropped connection, sending the last event's id, so nothing is missed.
function startLive() {
  stopLive();
  if (!liveBox.checked || !current) return;
  const url = new URL('/v1/stream', window.location);
  url.searchParams.set('q', current.q);
  const key = getKey();
  if (key) url.searchParams.set('api_dev_key', key);
  liveAdded = 0;
  live = new EventSource(url);
  const stream = live;
  liveStatus.hidden = false;
  liveStatus.textContent = 'Live: connecting…';
  stream.addEventListener('ready', () => {
    liveStatus.textContent = 'Live: new matches appear on top as they arrive.';
  });
  stream.addEventListener('tweet', (event) => {
    const item = renderTweet(JSON.parse(event.data));
    item.classList.add('new');
    results.prepend(item);
    liveAdded += 1;
    liveStatus.textContent = `Live: ${formatNumber(liveAdded)} new since you turned it on.`;
  });
  stream.addEventListener('delete', (event) => {
    const { tweet_id: id } = JSON.parse(event.data);
    for (const item of results.querySelectorAll('li.tweet')) {
      if (item.dataset.id === id) item.remove();
    }
  });
  stream.addEventListener('end', (event) => {
    // The server ended it (the key's stream quota): say why and stop.
    const { error } = JSON.parse(event.data);
    liveBox.checked = false;
    stopLive(`Live stopped: ${error.message}`);
  });
  stream.addEventListener('error', () => {
    // A refused stream (400, 401, 429) is not retried by the browser.
    if (stream.readyState === EventSource.CLOSED && live === stream) {
      liveBox.checked = false;
      stopLive('Live stopped: the server refused the stream (quota or key).');
    }
  });
}

function startCountdown(seconds) {
  clearInterval(countdown);
  let left = seconds;
  const show = () => {
    quota.textContent = left > 0 ? `Quota exhausted: searches resume in ${formatSeconds(left)}`
      : 'Quota available again';
  };
  show();
  countdown = setInterval(() => {
    left -= 1;
    show();
    if (left <= 0) clearInterval(countdown);
  }, 1000);
}

async function run(append) {
  const params = {
    q: current.q,
    sort: current.sort,
    limit: 20,
    highlight: 'true',
    exact_total: current.exact ? 'true' : undefined,
    page_token: append ? current.next : undefined,
  };
  more.disabled = true;
  document.body.dataset.busy = 'true';
  try {
    const { body, headers } = await apiGet('/v1/search', params, getKey());
    showMessage(message, '');
    clearInterval(countdown);
    if (!append) results.replaceChildren();
    for (const tweet of body.results) results.append(renderTweet(tweet));
    current.next = body.next_page_token;
    more.hidden = !current.next;
    const shown = results.children.length;
    // total_hits counts every match of the query (every page), exact up to 10,000; beyond,
    // it is 10,000 and total_is_exact is false.
    const count = formatNumber(body.total_hits);
    const total = body.total_is_exact ? count : `at least ${count}`;
    summary.textContent = shown === 0 ? 'No tweets match.'
      : `${formatNumber(shown)} shown of ${total} matching · ${body.took_ms.toFixed(1)} ms`;
    quota.textContent = quotaText(headers);
    if (!append) {
      drawTimeline(current.q, body.results);
      startLive();
    }
  } catch (error) {
    showMessage(message, error.message);
    if (error.status === 429) startCountdown(error.retryAfter);
    if (!append) {
      stopLive();
      results.replaceChildren();
      summary.textContent = '';
      more.hidden = true;
      timeline.hidden = true;
      charted = null;
    }
  } finally {
    more.disabled = false;
    document.body.dataset.busy = 'false';
  }
}

function search() {
  const q = queryInput.value.trim();
  if (!q) {
    showMessage(message, 'Type something to search for.', 'info');
    return;
  }
  current = { q, sort: sortSelect.value, exact: exactBox.checked, next: null };
  const url = new URL(window.location);
  url.searchParams.set('q', q);
  url.searchParams.set('sort', current.sort);
  if (current.exact) url.searchParams.set('exact_total', '1');
  else url.searchParams.delete('exact_total');
  history.replaceState(null, '', url);
  run(false);
}

form.addEventListener('submit', (event) => {
  event.preventDefault();
  search();
});
for (const control of [sortSelect, exactBox]) {
  control.addEventListener('change', () => {
    if (queryInput.value.trim()) search();
  });
}
liveBox.addEventListener('change', () => {
  if (liveBox.checked) startLive();
  else stopLive();
});
more.addEventListener('click', () => run(true));

async function start() {
  let demoKey = '';
  try {
    const { body } = await apiGet('/v1/web-config', {}, '');
    demoKey = body.demo_key || '';
  } catch (e) {
    // Without it the page still works with a typed key.
  }
  getKey = bindKeyInput(document.getElementById('api-key'), demoKey, 'tweetsearch.search_key');
  const params = new URLSearchParams(window.location.search);
  if (params.get('sort')) sortSelect.value = params.get('sort');
  exactBox.checked = params.get('exact_total') === '1';
  if (params.get('q')) {
    queryInput.value = params.get('q');
    search();
  }
  document.body.dataset.ready = 'true';
}
start();
