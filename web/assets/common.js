// What both pages share: the API key box, calls to the JSON API, messages for errors, and the
// quota read from the answers' headers.

// Fills the key box from this browser's storage (or with `fallback`) and saves edits. Returns
// a function that reads the current key.
export function bindKeyInput(input, fallback, storageName) {
  input.value = localStorage.getItem(storageName) || fallback || '';
  input.addEventListener('change', () => localStorage.setItem(storageName, input.value.trim()));
  return () => input.value.trim();
}

// A refused or failed call: the HTTP status, the API's error code, a message a person can act
// on, and for 429 the seconds to wait.
export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

// GET `path` with `params`, the key in the X-Api-Key header. Resolves to {body, headers};
// rejects with an ApiError.
export async function apiGet(path, params, key) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, value);
  }
  let response;
  try {
    response = await fetch(url, { headers: key ? { 'X-Api-Key': key } : {} });
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'The server cannot be reached. Is tweetsearchd running?', 0);
  }
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = null;
  }
  if (!response.ok) {
    const code = body && body.error ? body.error.code : `http_${response.status}`;
    const detail = body && body.error ? body.error.message : response.statusText;
    const retry = Number(response.headers.get('Retry-After')) || 0;
    throw new ApiError(response.status, code, explain(response.status, detail, retry), retry);
  }
  return { body, headers: response.headers };
}

// The message shown for an error status.
export function explain(status, detail, retryAfter) {
  switch (status) {
    case 400: return `The request was not understood: ${detail}.`;
    case 401: return `This API key is not valid (${detail}). Enter a key above.`;
    case 403: return `This API key may not do that: ${detail}.`;
    case 404: return `Not found: ${detail}.`;
    case 429: return `Quota exceeded: ${detail}. Try again in ${formatSeconds(retryAfter)}.`;
    case 503: return `The service is not ready: ${detail}.`;
    default: return `The server failed (${status}): ${detail}.`;
  }
}

export function formatSeconds(seconds) {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

// "Quota: 7 of 10 requests left per 1 h" from the quota headers; '' when no limit applied.
export function quotaText(headers) {
  const limit = headers.get('X-Ratelimit-Limit');
  const remaining = headers.get('X-Ratelimit-Remaining');
  if (limit === null || remaining === null) return '';
  const policy = headers.get('RateLimit-Policy') || '';
  const window = /w=(\d+)/.exec(policy);
  const per = window ? ` per ${formatSeconds(Number(window[1]))}` : '';
  return `Quota: ${remaining} of ${limit} requests left${per}`;
}

// Shows `text` in the message element, or hides it when empty.
export function showMessage(element, text, kind = 'error') {
  element.textContent = text || '';
  element.hidden = !text;
  element.dataset.kind = kind;
}

export function formatNumber(n) {
  return new Intl.NumberFormat('en').format(Math.round(n));
}

export function formatBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

// An element with attributes and children (strings become text, never HTML).
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}
