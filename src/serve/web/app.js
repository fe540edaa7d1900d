// The page of `rag serve`: a client of the same HTTP API as any other (POST /ask streamed,
// POST /search, GET /health, GET /metrics, GET /runs). No framework, no build step.
'use strict';

const $ = (id) => document.getElementById(id);

// Builds an element; strings become text nodes, never HTML.
function h(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== undefined && child !== null && child !== false) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

const ms = (value) => (value >= 100 ? value.toFixed(0) : value.toFixed(1)) + ' ms';

// ---- errors: always a message in the page, never a blank one ----

function showError(message) {
  const box = $('error');
  box.hidden = false;
  box.append(h('div', {}, message));
}

function clearError() {
  $('error').replaceChildren();
  $('error').hidden = true;
}

window.addEventListener('error', (event) => showError(`Page error: ${event.message}`));
window.addEventListener('unhandledrejection', (event) => showError(`Page error: ${event.reason}`));

class ApiError extends Error {}

// A response's `{"error": {"message"}}`, or what else it said.
async function errorMessage(response) {
  const text = await response.text();
  try {
    const message = JSON.parse(text).error.message;
    if (message) return `${response.status}: ${message}`;
  } catch (_) { /* not the API's error shape: show the text */ }
  return `${response.status} ${response.statusText}: ${text.slice(0, 300)}`;
}

// The API key, when the server wants one: asked for once, kept in this tab only.
const KEY_ITEM = 'rag-api-key';

function authHeaders(headers = {}) {
  const key = sessionStorage.getItem(KEY_ITEM);
  return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
}

// Asks for the key after a 401 to a request sent with `used`; whether to try again. A key
// stored meanwhile (another request asked) is tried without asking again.
function askForKey(used) {
  const stored = sessionStorage.getItem(KEY_ITEM);
  if (stored && stored !== used) return true;
  const key = window.prompt(stored ? 'That API key was refused. API key:' : 'This server wants an API key:');
  if (!key || !key.trim()) return false;
  sessionStorage.setItem(KEY_ITEM, key.trim());
  return true;
}

async function api(path, body, signal) {
  for (;;) {
    const used = sessionStorage.getItem(KEY_ITEM);
    const init = body === undefined ? { signal, headers: authHeaders() }
      : { method: 'POST', headers: authHeaders({ 'Content-Type': 'application/json' }), body: JSON.stringify(body), signal };
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      if (err.name === 'AbortError') throw err;
      throw new ApiError(`Could not reach the server (${path}): ${err.message}`);
    }
    if (response.status === 401 && askForKey(used)) continue;
    if (!response.ok) throw new ApiError(`The server refused ${path}: ${await errorMessage(response)}`);
    return response;
  }
}

const getJson = async (path, signal) => (await api(path, undefined, signal)).json();
const postJson = async (path, body, signal) => (await api(path, body, signal)).json();

// Shows what went wrong unless the work was cancelled on purpose.
function report(err) {
  if (err.name !== 'AbortError') showError(err instanceof ApiError ? err.message : `Page error: ${err.message}`);
}

// ---- settings: the controls, their defaults, the URL ----

// Control id, URL parameter, /ask field, /search field (none: /search does not take it).
const FIELDS = [
  { id: 'mode', param: 'mode', ask: 'mode', search: 'mode', text: true },
  { id: 'layers', param: 'layers', ask: 'layers', search: 'layers' },
  { id: 'dim', param: 'dim', ask: 'dim', search: 'dim' },
  { id: 'k', param: 'k', ask: 'top_k', search: 'k' },
  { id: 'hops', param: 'hops', ask: 'hops', search: 'hops' },
  { id: 'ctx', param: 'ctx', ask: 'context_tokens' },
];

const state = {
  health: null,
  defaults: {},
  run: null, // AbortController of the question being answered
  preview: null, // AbortController of a settings change's search
};

function readControl(field) {
  const raw = $(field.id).value.trim();
  if (field.text) return raw;
  const n = Number(raw);
  // Whatever was typed goes to the server as typed when it is not a whole number, so that
  // the server's message explains the problem.
  return raw !== '' && Number.isInteger(n) ? n : raw;
}

function settings() {
  return Object.fromEntries(FIELDS.map((f) => [f.id, readControl(f)]));
}

// The settings that differ from the server's defaults: all that /ask is sent, so the page works
// with servers that take fewer fields.
function changed(current) {
  return FIELDS.filter((f) => String(current[f.id]) !== String(state.defaults[f.id]));
}

function writeUrl() {
  const params = new URLSearchParams();
  const question = $('question').value.trim();
  if (question) params.set('q', question);
  const current = settings();
  for (const f of changed(current)) params.set(f.param, current[f.id]);
  const query = params.toString();
  history.replaceState(null, '', query ? `?${query}` : location.pathname);
}

function fillSelect(id, values, label) {
  $(id).replaceChildren(...values.map((v) => h('option', { value: v }, label ? label(v) : v)));
}

function setupControls(health) {
  const index = health.index;
  const modes = health.modes || ['dense', 'bm25', 'hybrid'];
  const dims = index.dims || [...new Set([index.default_dim, index.stored_dim])].sort((a, b) => a - b);
  fillSelect('mode', modes, (m) => (m === 'bm25' ? 'BM25' : m));
  fillSelect('layers', index.layers);
  fillSelect('dim', dims);
  // The server's own /ask defaults when it says them (older servers: dense, whole paragraphs).
  const ask = health.ask || {};
  state.defaults = {
    mode: ask.mode || (modes.includes('dense') ? 'dense' : modes[0]),
    layers: index.layers[index.layers.length - 1],
    dim: index.default_dim,
    k: ask.top_k || 5,
    hops: ask.hops || 1,
    ctx: ask.context_tokens ?? 0,
  };
  const params = new URLSearchParams(location.search);
  for (const f of FIELDS) {
    let value = params.has(f.param) ? params.get(f.param) : state.defaults[f.id];
    const control = $(f.id);
    if (control.tagName === 'SELECT' && ![...control.options].some((o) => o.value === String(value))) {
      showError(`The link asks for ${f.param}=${value}, which this server does not offer; using ${state.defaults[f.id]}.`);
      value = state.defaults[f.id];
    }
    control.value = value;
  }
  $('precision').value = health.models.encoder.precision;
  if (params.has('q')) $('question').value = params.get('q');
}

// ---- the answer, streamed ----

// Calls onEvent(name, data) for each server-sent event of a streamed /ask (or once with 'done'
// when the server answered with plain JSON).
async function streamAsk(body, signal, onEvent) {
  const response = await api('/ask', body, signal);
  if (!(response.headers.get('content-type') || '').startsWith('text/event-stream')) {
    onEvent('done', await response.json());
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length) onEvent(name, JSON.parse(data.join('\n')));
    }
  }
}

// Timing fields in the order they happen; whichever the server reports are drawn.
const TIMING_PARTS = [
  ['encode_ms', 'encode'], ['search_ms', 'search'], ['retrieve_ms', 'retrieval'],
  ['select_ms', 'sentence selection'], ['prompt_ms', 'prompt'],
  ['prompt_eval_ms', 'prompt evaluation'], ['generation_ms', 'generation'], ['generate_ms', 'generation'],
];

function renderTiming(timings, firstTokenMs) {
  const parts = TIMING_PARTS.filter(([key]) => typeof timings[key] === 'number');
  const sum = parts.reduce((s, [key]) => s + timings[key], 0) || 1;
  const bar = h('div', { class: 'bar', role: 'img', 'aria-label': 'time spent per stage' },
    parts.map(([key, label], i) => {
      const span = h('span', { class: `t${i % 6}`, title: `${label} ${ms(timings[key])}` });
      span.style.flexBasis = `${(100 * timings[key]) / sum}%`;
      return span;
    }));
  const legend = h('ul', { class: 'legend' },
    parts.map(([key, label], i) => h('li', {}, h('i', { class: `t${i % 6}` }), `${label} ${ms(timings[key])}`)),
    typeof timings.total_ms === 'number' ? h('li', {}, h('strong', {}, `total ${ms(timings.total_ms)}`)) : null,
    firstTokenMs !== null ? h('li', { id: 'first-token', dataset: { ms: firstTokenMs.toFixed(1) } },
      `first token in the browser after ${ms(firstTokenMs)}`) : null,
    typeof timings.prompt_tokens === 'number' ? h('li', {}, `${timings.prompt_tokens} prompt tokens`) : null);
  $('timing').replaceChildren(bar, legend);
}

// A source's paragraph, with the sentences that went into the prompt marked when the server
// says which did.
function paragraph(hit) {
  if (!Array.isArray(hit.sentences)) return h('p', {}, hit.text);
  return h('p', {}, hit.sentences.map((s, i) => [i ? ' ' : '', s.in_prompt ? h('mark', {}, s.text) : s.text]));
}

function renderSources(hits, note, meta) {
  $('sources-note').textContent = note;
  Object.assign($('sources').dataset, meta);
  $('sources').replaceChildren(...hits.map((hit) => h('li', { class: 'card', dataset: { id: hit.id } },
    h('header', {},
      h('span', { class: 'rank' }, `#${hit.rank}`),
      h('span', { class: 'title' }, hit.title),
      h('span', { class: 'meta' }, `score ${Number(hit.score).toFixed(3)}`),
      hit.hop > 1 ? h('span', { class: 'meta' }, `hop ${hit.hop}`) : null,
      hit.source ? h('span', { class: 'meta source' }, `${hit.source.path}:${hit.source.start}-${hit.source.end}`) : null),
    paragraph(hit))));
}

function searchBody(question, current, layers, dim) {
  return { query: question, k: current.k, mode: current.mode, hops: current.hops, layers, dim };
}

const where = (r) => `${r.mode}, ${r.layers} layers, ${r.dim} dims`;

// The evidence at the current settings, from /search (milliseconds, before any answer).
async function showRetrieved(question, signal, note) {
  const current = settings();
  const result = await postJson('/search', searchBody(question, current, current.layers, current.dim), signal);
  renderSources(result.hits, `${note} (${where(result)})`, { state: 'retrieved', layers: result.layers, dim: result.dim });
  return result;
}

// Ask stays enabled while busy: asking again replaces the question being answered (and a
// disabled default button would stop Enter from submitting the form).
function setBusy(busy) {
  $('stop').hidden = !busy;
  $('answer').setAttribute('aria-busy', String(busy));
}

async function ask(event) {
  event.preventDefault();
  const question = $('question').value.trim();
  if (!question) {
    clearError();
    showError('Type a question first.');
    $('question').focus();
    return;
  }
  clearError();
  writeUrl();
  state.run?.abort();
  state.preview?.abort();
  const run = new AbortController();
  state.run = run;
  const current = settings();
  const answer = $('answer');
  answer.replaceChildren();
  answer.dataset.tokens = '0';
  delete answer.dataset.done;
  $('timing').replaceChildren();
  renderSources([], '', { state: 'asking', layers: '', dim: '' });
  setBusy(true);
  try {
    await showRetrieved(question, run.signal, 'retrieved');
    if (!state.health.models.generator) {
      answer.replaceChildren(h('span', { class: 'muted' },
        'No generator is loaded (rag serve was started with --no-llm or without the default generator; --llm FILE names one); the evidence is below.'));
    } else {
      await answerStreamed(question, current, run.signal);
    }
    await tradeoff(question, current, run.signal);
  } catch (err) {
    report(err);
  } finally {
    answer.classList.remove('pending');
    if (state.run === run) {
      setBusy(false);
      state.run = null;
    }
    refreshStatus();
  }
}

async function answerStreamed(question, current, signal) {
  const answer = $('answer');
  const body = { question, stream: true };
  for (const f of changed(current)) body[f.ask] = current[f.id];
  answer.classList.add('pending');
  const started = performance.now();
  let firstToken = null;
  let text = '';
  let finished = false;
  await streamAsk(body, signal, (name, data) => {
    if (name === 'token') {
      if (firstToken === null) firstToken = performance.now() - started;
      text += data.token;
      answer.textContent = text;
      answer.dataset.tokens = String(Number(answer.dataset.tokens) + 1);
    } else if (name === 'done') {
      finished = true;
      // Time to the whole answer as the browser saw it (eval/web measures it).
      answer.dataset.ms = (performance.now() - started).toFixed(1);
      answer.dataset.serverMs = data.timings?.total_ms ?? '';
      answer.textContent = data.answer || text;
      if (!answer.textContent.trim()) answer.replaceChildren(h('span', { class: 'muted' }, '(the generator returned an empty answer)'));
      answer.dataset.done = 'true';
      renderTiming(data.timings || {}, firstToken);
      const used = data.layers !== undefined ? `, ${data.layers} layers, ${data.dim} dims` : '';
      renderSources(data.sources || [], `given to the generator, ${state.health.models.generator} (${data.mode || current.mode}${used})`, { state: 'answered', layers: data.layers ?? '', dim: data.dim ?? '' });
    } else if (name === 'error') {
      finished = true;
      showError(`/ask: ${data.error?.message || JSON.stringify(data)}`);
    }
  });
  if (!finished) showError('/ask: the answer stream ended before the answer was complete.');
}

// ---- depth x size, for this question ----

function cellColour(overlap) {
  // White (nothing in common with the full result) to light blue (all of it): dark text stays readable.
  const l = 97 - 30 * overlap;
  return `hsl(210, 70%, ${l}%)`;
}

async function tradeoff(question, current, signal) {
  const box = $('tradeoff');
  const { layers, default_dim: defaultDim } = state.health.index;
  const dims = [...$('dim').options].map((o) => Number(o.value));
  // BM25 ignores depth and size: compare the dense rankings then.
  const mode = current.mode === 'bm25' ? 'dense' : current.mode;
  const full = { layers: layers[layers.length - 1], dim: dims[dims.length - 1] };
  const cells = new Map();
  const key = (l, d) => `${l}x${d}`;
  const table = h('table', { class: 'grid', dataset: { state: 'running', mode } },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'layers \\ dims'), dims.map((d) => h('th', { scope: 'col' }, d)))),
    h('tbody', {}, layers.map((l) => h('tr', {}, h('th', { scope: 'row' }, l),
      dims.map((d) => {
        const td = h('td', {}, h('div', { class: 'cell muted' }, '…'));
        cells.set(key(l, d), td);
        return td;
      })))));
  box.replaceChildren(
    h('p', { class: 'muted' }, `${mode} retrieval, top ${current.k}${current.mode === 'bm25' ? ' (BM25 does not depend on depth or size, so this is dense)' : ''}; overlap with ${full.layers} layers × ${full.dim} dims; titles in italics are not in that top ${current.k}.`),
    h('div', { class: 'scroll' }, table));
  // The full-depth, full-size cell first: every other cell is compared with it.
  const order = [full, ...layers.flatMap((l) => dims.map((d) => ({ layers: l, dim: d })))
    .filter((c) => key(c.layers, c.dim) !== key(full.layers, full.dim))];
  let reference = null;
  const started = performance.now();
  // One search at a time: bounded load on the server, and each cell's time is its own.
  for (const cell of order) {
    const result = await postJson('/search', searchBody(question, { ...current, mode }, cell.layers, cell.dim), signal);
    const ids = result.hits.map((hit) => hit.id);
    reference ??= new Set(ids);
    const shared = ids.filter((id) => reference.has(id)).length;
    const overlap = reference.size ? shared / reference.size : 0;
    const isCurrent = cell.layers === current.layers && cell.dim === current.dim;
    const button = h('button', {
      type: 'button',
      class: `cell${isCurrent ? ' current' : ''}`,
      dataset: { layers: cell.layers, dim: cell.dim, overlap: overlap.toFixed(2), searchMs: result.timings.search_ms },
      'aria-label': `${cell.layers} layers, ${cell.dim} dims: overlap ${shared} of ${reference.size}, search ${ms(result.timings.search_ms)}; use this setting`,
      onclick: () => useSetting(cell.layers, cell.dim),
    },
    h('div', { class: 'head' }, `overlap ${shared}/${reference.size}`, cell.dim === defaultDim && cell.layers === full.layers ? h('span', { class: 'muted' }, 'default') : null),
    h('div', { class: 'muted' }, `search ${ms(result.timings.search_ms)} · encode ${ms(result.timings.encode_ms)}`),
    h('ol', {}, result.hits.map((hit) => h('li', { class: reference.has(hit.id) ? '' : 'new', title: hit.title }, hit.title))));
    button.style.background = cellColour(overlap);
    cells.get(key(cell.layers, cell.dim)).replaceChildren(button);
  }
  table.dataset.ms = (performance.now() - started).toFixed(1);
  table.dataset.state = 'done';
}

function useSetting(layers, dim) {
  $('layers').value = layers;
  $('dim').value = dim;
  settingsChanged();
  $('layers').focus();
}

// A changed setting: new URL, and the evidence at the new setting right away (the answer needs
// another Ask, which takes seconds).
async function settingsChanged() {
  writeUrl();
  const question = $('question').value.trim();
  if (!question || !state.health || state.run) return;
  state.preview?.abort();
  const preview = new AbortController();
  state.preview = preview;
  clearError();
  try {
    await showRetrieved(question, preview.signal, 'retrieved at the new setting; Ask again for its answer');
    document.querySelectorAll('#tradeoff .cell.current').forEach((c) => c.classList.remove('current'));
    const current = settings();
    document.querySelector(`#tradeoff .cell[data-layers="${current.layers}"][data-dim="${current.dim}"]`)?.classList.add('current');
  } catch (err) {
    report(err);
  }
}

// ---- sweeps measured by rag eval ----

function heatmap(title, cells, value) {
  const layers = [...new Set(cells.map((c) => c.layers))].sort((a, b) => a - b);
  const dims = [...new Set(cells.map((c) => c.dim))].sort((a, b) => a - b);
  const at = (l, d) => cells.find((c) => c.layers === l && c.dim === d);
  const values = cells.map(value).filter((v) => typeof v === 'number');
  const lo = Math.min(...values);
  const span = Math.max(...values) - lo || 1;
  return h('table', { class: 'grid heatmap' },
    h('caption', {}, title),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'layers \\ dims'), dims.map((d) => h('th', { scope: 'col' }, d)))),
    h('tbody', {}, layers.map((l) => h('tr', {}, h('th', { scope: 'row' }, l), dims.map((d) => {
      const cell = at(l, d);
      const v = cell ? value(cell) : null;
      if (typeof v !== 'number') return h('td', {}, '–');
      const td = h('td', {}, (100 * v).toFixed(1));
      td.style.background = cellColour((v - lo) / span);
      return td;
    })))));
}

async function showRun(name) {
  const box = $('heatmaps');
  box.replaceChildren();
  if (!name) return;
  try {
    const summary = await getJson(`/runs/${encodeURIComponent(name)}/summary.json`);
    const cells = summary.cells.filter((c) => Number.isInteger(c.layers) && Number.isInteger(c.dim));
    const c = summary.config;
    box.append(h('p', { class: 'muted' }, `${c.questions} questions, ${c.mode} retrieval, top ${c.top_k}, generator ${c.generator || 'none'}`));
    box.append(heatmap('Recall@5 (%)', cells, (cell) => cell.recall?.['5']));
    if (cells.some((cell) => typeof cell.exact_match === 'number')) {
      box.append(heatmap('Exact match (%)', cells, (cell) => cell.exact_match));
    }
  } catch (err) {
    report(err);
  }
}

async function loadRuns() {
  try {
    const { dir, runs } = await getJson('/runs');
    if (!runs.length) {
      $('runs-note').textContent = dir ? `No sweeps under ${dir} yet (rag eval --sweep makes one).`
        : 'The server has no runs folder (rag serve --runs DIR).';
      return;
    }
    $('runs-note').textContent = `From ${dir}.`;
    fillSelect('run', runs.map((r) => r.name), (name) => {
      const r = runs.find((x) => x.name === name);
      return `${name} (${r.cells} cells, ${r.questions} questions)`;
    });
    $('run-label').hidden = false;
    await showRun($('run').value);
  } catch (err) {
    report(err);
  }
}

// ---- server status ----

function facts(id, rows) {
  $(id).replaceChildren(...rows.filter(([, v]) => v !== undefined && v !== null && v !== '')
    .flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]));
}

// Sums a Prometheus text's samples of `name`, grouped by the label `by` (or all together).
function metricSums(text, name, by) {
  const sums = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = line.match(/^([a-z_]+)(?:\{(.*)\})? ([0-9.eE+-]+)$/);
    if (!match || match[1] !== name) continue;
    const label = by ? (match[2] || '').match(new RegExp(`${by}="([^"]*)"`))?.[1] ?? '' : '';
    sums[label] = (sums[label] || 0) + Number(match[3]);
  }
  return sums;
}

function showHealth(health) {
  const encoder = health.models.encoder || {};
  const index = health.index || {};
  facts('health', [
    ['status', health.status],
    ['encoder', encoder.name && `${encoder.name}, ${encoder.layers} layers, ${encoder.hidden_size} dims, ${encoder.precision}`],
    ['generator', health.models.generator || 'none'],
    ['index', index.dir ? `${index.dir}: ${index.documents} documents` : index.documents !== undefined && `${index.documents} documents`],
    ['generation', index.generation],
    ['stored depths', index.layers && index.layers.join(', ')],
    ['sizes', index.dims ? index.dims.join(', ') : index.stored_dim && `1 to ${index.stored_dim}`],
    ['generation queue', health.queues?.generate],
    ['encoding queue', health.queues?.embed],
  ]);
}

async function refreshStatus() {
  try {
    const response = await fetch('/health', { headers: authHeaders() });
    const health = await response.json();
    showHealth(health);
    if (health.status !== 'ready') return;
    const text = await (await api('/metrics')).text();
    const requests = metricSums(text, 'rag_http_requests_total', 'route');
    facts('metrics', [
      ['requests', Object.entries(requests).map(([route, n]) => `${route} ${n}`).join(', ')],
      ['tokens generated', metricSums(text, 'rag_tokens_generated_total')['']],
      ['encoder batches', metricSums(text, 'rag_embed_batches_total')['']],
      ['index look-ups', metricSums(text, 'rag_search_lookups_total')['']],
    ]);
  } catch (err) {
    report(err);
  }
}

// ---- adding a document (POST /documents): a new generation, served once installed ----

async function addDocument(event) {
  event.preventDefault();
  const title = $('add-title').value.trim();
  const text = $('add-text').value.trim();
  if (!title || !text) return;
  $('add-result').textContent = 'Adding…';
  try {
    const data = await (await api('/documents', { title, text })).json();
    const what = data.up_to_date ? 'already there, unchanged' : data.changed ? 'replaced' : 'added';
    $('add-result').textContent = `“${title}” ${what}: ${data.documents} documents, generation ${data.generation}.`;
    $('add-text').value = '';
    refreshStatus();
  } catch (err) {
    $('add-result').textContent = '';
    report(err);
  }
}

// ---- start ----

async function waitForServer() {
  for (;;) {
    let health;
    try {
      health = await (await fetch('/health', { headers: authHeaders() })).json();
    } catch (err) {
      $('status-line').textContent = `Cannot reach the server (${err.message}); retrying…`;
    }
    if (health) {
      showHealth(health);
      if (health.status === 'ready') return health;
      $('status-line').textContent = 'The server is loading its models…';
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function start() {
  const health = await waitForServer();
  state.health = health;
  setupControls(health);
  const encoder = health.models.encoder;
  $('status-line').textContent = `Ready: ${encoder.name} (${encoder.precision}), ${health.index.documents} documents, generator ${health.models.generator || 'none'}.`;
  $('ask-form').addEventListener('submit', ask);
  $('stop').addEventListener('click', () => state.run?.abort());
  for (const f of FIELDS) $(f.id).addEventListener('change', settingsChanged);
  $('run').addEventListener('change', () => showRun($('run').value));
  $('refresh-status').addEventListener('click', refreshStatus);
  $('add-form').addEventListener('submit', addDocument);
  refreshStatus();
  loadRuns();
  if ($('question').value.trim()) $('ask-form').requestSubmit();
}

start().catch(report);
