// Roder's web page: a JSON-RPC client of the app server over the WebSocket
// it was served from. Plain script, no framework, no build step. Text from
// threads (a model's words, tool output, diffs) is only ever set as
// textContent, never parsed as HTML.
'use strict';

const PAGE = 300; // events per history page
const LIST_EVERY_MS = 1000; // the thread list is polled (no list notification exists)
const DECISIONS = ['allow_once', 'allow_thread', 'allow_always', 'reject', 'reject_always', 'reject_and_stop'];

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// What the bench and the browser test read.
const metrics = { firstPaintMs: null, latencies: [], pagesLoaded: 0, subscribed: null };
window.roderMetrics = metrics;

const rpc = { ws: null, nextId: 1, pending: new Map(), opened: false };
let token = sessionStorage.getItem('roder.token') || '';
let threadInfos = new Map(); // threadId -> {info, running}
let view = null; // the open thread

// ---------------------------------------------------------------- connection

function hex(text) {
  return Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, '0')).join('');
}

function connect() {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const protocols = ['roder.v1'];
  if (token) protocols.push('roder.token.' + hex(token));
  setStatus('connecting', 'connecting…');
  rpc.opened = false;
  const ws = new WebSocket(scheme + '//' + location.host + '/', protocols);
  rpc.ws = ws;
  ws.onopen = async () => {
    rpc.opened = true;
    $('login').hidden = true;
    try {
      await call('initialize', { clientInfo: { name: 'web' }, capabilities: { approvals: true } });
    } catch (error) {
      toast('initialize failed: ' + error.message);
      return;
    }
    setStatus('connected', 'connected');
    route();
    refreshThreads();
  };
  ws.onmessage = (frame) => receive(JSON.parse(frame.data));
  ws.onclose = () => {
    for (const { reject } of rpc.pending.values()) reject(new Error('disconnected'));
    rpc.pending.clear();
    if (!rpc.opened) {
      // The upgrade was refused (a browser is not told why): a token is
      // needed, or the one given is wrong.
      setStatus('refused', 'refused');
      $('login-why').textContent = token
        ? 'The server refused the token.'
        : 'This server needs its token.';
      $('login').hidden = false;
      $('thread-list').replaceChildren();
      return;
    }
    setStatus('disconnected', 'disconnected, reconnecting…');
    if (view) view.subscribed = false;
    setTimeout(connect, 1000);
  };
}

function call(method, params) {
  return new Promise((resolve, reject) => {
    if (!rpc.ws || rpc.ws.readyState !== WebSocket.OPEN) {
      reject(new Error('not connected'));
      return;
    }
    const id = rpc.nextId++;
    rpc.pending.set(id, { resolve, reject });
    rpc.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  });
}

function respond(id, result) {
  if (rpc.ws && rpc.ws.readyState === WebSocket.OPEN) {
    rpc.ws.send(JSON.stringify({ jsonrpc: '2.0', id, result }));
  }
}

function receive(message) {
  if (message.method === 'thread/event') return onEvent(message.params);
  if (message.method === 'approval/request' && message.id !== undefined) return onApprovalRequest(message);
  if (message.method === 'approval/resolved') return onApprovalResolved(message.params);
  if (message.id !== undefined && message.id !== null && rpc.pending.has(message.id)) {
    const { resolve, reject } = rpc.pending.get(message.id);
    rpc.pending.delete(message.id);
    if (message.error) {
      const error = new Error(message.error.message);
      error.code = message.error.code;
      reject(error);
    } else {
      resolve(message.result);
    }
    return;
  }
  if (message.error && message.error.code === -32008 && view) {
    // Too slow: subscriptions were dropped; resume from the last seq seen.
    view.subscribed = false;
    subscribe(view).catch((error) => toast(error.message));
  }
}

function setStatus(state, text) {
  const status = $('status');
  status.dataset.state = state;
  status.textContent = text;
}

let toastTimer = null;
function toast(text) {
  const node = $('toast');
  node.textContent = text;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { node.textContent = ''; }, 8000);
}

// ---------------------------------------------------------------- thread list

// Every fifth poll reads every listed thread's running turn (a turn that
// started elsewhere does not change `updatedAt` at once); the others read
// only the threads that changed or were running.
let listPolls = 0;

async function refreshThreads() {
  const readAll = listPolls++ % 5 === 0;
  let listed;
  try {
    listed = await call('thread/list', { limit: 100 });
  } catch (error) {
    return;
  }
  const fresh = new Map();
  await Promise.all(listed.threads.map(async (info) => {
    const known = threadInfos.get(info.threadId);
    let running = known ? known.running : null;
    // Ask for the running turn only when something may have changed.
    if (readAll || !known || known.info.updatedAt !== info.updatedAt || known.running) {
      try {
        const read = await call('thread/read', { threadId: info.threadId });
        running = read.runningTurnId;
      } catch (error) {
        running = null;
      }
    }
    fresh.set(info.threadId, { info, running });
  }));
  threadInfos = new Map(listed.threads.map((info) => [info.threadId, fresh.get(info.threadId)]));
  renderThreadList();
}

function usageText(usage) {
  if (!usage) return '';
  const input = usage.input_tokens ?? usage.inputTokens ?? 0;
  const output = usage.output_tokens ?? usage.outputTokens ?? 0;
  return input + ' in / ' + output + ' out';
}

function runnerText(info) {
  if (!info.runner) return 'local';
  const state = info.runnerState;
  let stateText = 'not provisioned';
  if (state) {
    stateText = 'session ' + String(state.sessionId).slice(0, 12);
    const status = state.metadata && (state.metadata.status || state.metadata.state);
    if (typeof status === 'string') stateText += ', ' + status;
    if (state.snapshot) stateText += ', snapshot';
  }
  if (view && view.id === info.threadId && view.runnerAction) stateText += ', ' + view.runnerAction;
  return info.runner.providerId + ' (' + stateText + ')';
}

function renderThreadList() {
  const list = $('thread-list');
  const items = [];
  for (const { info, running: polled } of threadInfos.values()) {
    // The open thread's state is known from its events, at once.
    const running = view && view.id === info.threadId ? view.runningTurnId : polled;
    const item = el('li', 'thread-item');
    item.dataset.threadId = info.threadId;
    if (view && view.id === info.threadId) item.classList.add('current');
    const link = el('a', 'thread-link', info.title || info.threadId.slice(0, 8));
    link.href = '/threads/' + encodeURIComponent(info.threadId);
    link.addEventListener('click', (event) => {
      event.preventDefault();
      navigate(info.threadId);
    });
    item.append(link);
    const state = el('span', 'thread-state', running ? 'running' : 'idle');
    state.dataset.state = running ? 'running' : 'idle';
    item.append(state);
    item.append(el('div', 'thread-line', (info.model ? (info.provider ? info.provider + '/' : '') + info.model : 'default model') + ' · ' + runnerText(info)));
    item.append(el('div', 'thread-line', 'active ' + shortTime(info.updatedAt) + ' · ' + usageText(info.usage)));
    items.push(item);
  }
  list.replaceChildren(...items);
}

function shortTime(stamp) {
  const date = new Date(parseTime(stamp));
  return isNaN(date) ? '' : date.toLocaleString();
}

// RFC 3339 with up to nine fraction digits, to epoch milliseconds.
function parseTime(stamp) {
  if (!stamp) return NaN;
  return Date.parse(String(stamp).replace(/(\.\d{3})\d+/, '$1'));
}

// ---------------------------------------------------------------- routing

function route() {
  const match = location.pathname.match(/^\/threads\/([^/]+)$/);
  if (match) {
    openThread(decodeURIComponent(match[1])).catch((error) => toast(error.message));
  } else {
    closeThread();
  }
}

function navigate(threadId) {
  history.pushState(null, '', '/threads/' + encodeURIComponent(threadId));
  route();
}

window.addEventListener('popstate', route);

function closeThread() {
  if (view && view.subscribed) call('thread/unsubscribe', { threadId: view.id }).catch(() => {});
  view = null;
  $('thread').hidden = true;
  $('empty').hidden = false;
  renderThreadList();
}

// ---------------------------------------------------------------- one thread

async function openThread(threadId) {
  if (view && view.id === threadId && view.subscribed) return;
  if (view && view.id !== threadId) closeThread();
  const read = await call('thread/read', { threadId });
  view = {
    id: threadId,
    info: read.thread,
    runningTurnId: read.runningTurnId,
    firstSeq: read.lastSeq + 1, // the oldest seq on the page
    lastSeq: read.lastSeq, // the newest stored seq on the page
    cards: new Map(), // callId -> tool card
    live: new Map(), // turnId -> streaming bubbles
    turns: new Map(), // turnId -> timeline facts
    turnNumbers: [],
    loading: false,
    subscribed: false,
  };
  $('empty').hidden = true;
  $('thread').hidden = false;
  $('events').replaceChildren();
  $('approvals').replaceChildren();
  renderHead();
  renderThreadList();
  await loadOlder();
  stickToBottom = true;
  followBottom();
  if (metrics.firstPaintMs === null) {
    // Everything until the newest events are on screen, from navigation.
    requestAnimationFrame(() => { metrics.firstPaintMs = performance.now(); });
  }
  await subscribe(view);
  loadRewindTargets();
}

async function subscribe(current) {
  const result = await call('thread/resume', { threadId: current.id, afterSeq: current.lastSeq });
  if (view === current) {
    current.subscribed = true;
    metrics.subscribed = current.id;
    current.info = result.thread;
    renderHead();
  }
}

function renderHead() {
  const info = view.info;
  $('thread-title').textContent = info.title || info.threadId;
  $('thread-meta').textContent = [
    info.workspace,
    info.model ? (info.provider ? info.provider + '/' : '') + info.model : 'default model',
    'runner: ' + runnerText(info),
    'tokens: ' + usageText(info.usage),
    view.runningTurnId ? 'running' : 'idle',
  ].join(' · ');
  $('interrupt').disabled = !view.runningTurnId;
  $('mode').value = (info.approvals && info.approvals.mode) || '';
  $('pause').hidden = $('resume').hidden = !info.runner;
}

async function loadOlder() {
  const current = view;
  if (!current || current.loading || current.firstSeq <= 1) return;
  current.loading = true;
  const end = current.firstSeq - 1;
  const cursor = Math.max(0, end - PAGE);
  try {
    const page = await call('thread/events', { threadId: current.id, cursor, limit: end - cursor });
    if (view !== current) return;
    const events = page.events.filter((envelope) => envelope.seq <= end);
    const log = $('log');
    const before = log.scrollHeight;
    const fragment = document.createDocumentFragment();
    for (const envelope of events) render(envelope, fragment, false);
    $('events').prepend(fragment);
    current.firstSeq = cursor + 1;
    log.scrollTop += log.scrollHeight - before;
    metrics.pagesLoaded += 1;
    $('older').textContent = current.firstSeq <= 1 ? 'the beginning of the thread' : 'scroll up for older events';
    renderTimeline();
  } finally {
    current.loading = false;
  }
  // A page too short to scroll could never ask for more: fill the view.
  const log = $('log');
  if (view === current && current.firstSeq > 1 && log.scrollHeight <= log.clientHeight + 200) {
    setTimeout(() => loadOlder().catch((error) => toast(error.message)), 0);
  }
}

function onEvent(envelope) {
  if (!view || envelope.threadId !== view.id) return;
  const event = envelope.event;
  const transient = event.type === 'message_delta' || event.type === 'reasoning_delta';
  if (!transient) {
    if (envelope.seq <= view.lastSeq) return; // already on the page
    view.lastSeq = envelope.seq;
  }
  render(envelope, $('events'), true);
  const emitted = parseTime(envelope.timestamp);
  if (!isNaN(emitted)) metrics.latencies.push(Date.now() - emitted);
  followBottom();
  if (!transient) scheduleTimeline();
}

// Whether the reader is at the newest events (then new ones keep them in
// view); scrolling up to read older ones turns it off.
// Scrolling reads the layout, so it is done once a frame, not per event: a
// burst of events would otherwise lay the page out once each.
let stickToBottom = true;
let lastScrollTop = 0;
let scrollQueued = false;
function followBottom() {
  if (scrollQueued) return;
  scrollQueued = true;
  requestAnimationFrame(() => {
    scrollQueued = false;
    const log = $('log');
    if (stickToBottom) log.scrollTop = log.scrollHeight;
  });
}

let timelineQueued = false;
function scheduleTimeline() {
  if (timelineQueued) return;
  timelineQueued = true;
  setTimeout(() => { timelineQueued = false; if (view) renderTimeline(); }, 250);
}

// ---------------------------------------------------------------- rendering

function row(cls, envelope) {
  const node = el('div', 'event ' + cls);
  node.dataset.seq = envelope.seq;
  node.dataset.type = envelope.event.type;
  return node;
}

function toolCard(callId, name, parent, turnId) {
  let card = view.cards.get(callId);
  if (card) return card;
  card = el('div', 'event tool');
  card.dataset.callId = callId;
  card.dataset.turnId = turnId || '';
  card.dataset.status = 'requested';
  const head = el('div', 'tool-head');
  head.append(el('span', 'tool-name', name || 'tool'), el('span', 'tool-status', 'requested'), el('span', 'tool-time', ''));
  card.append(head, el('pre', 'tool-args', ''), el('div', 'tool-diffs'), el('pre', 'tool-output', ''));
  view.cards.set(callId, card);
  parent.append(card);
  return card;
}

function setToolStatus(card, status, text) {
  card.dataset.status = status;
  card.querySelector('.tool-status').textContent = text || status;
}

function prettyArgs(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (error) {
    return String(text);
  }
}

function renderDiff(diff, path) {
  const box = el('div', 'diff');
  if (path) box.append(el('div', 'diff-path', path));
  const pre = el('pre', 'diff-body');
  for (const line of String(diff).split('\n')) {
    let cls = 'ctx';
    if (line.startsWith('+++') || line.startsWith('---')) cls = 'file';
    else if (line.startsWith('@@')) cls = 'hunk';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    pre.append(el('span', 'diff-' + cls, line + '\n'));
  }
  box.append(pre);
  return box;
}

function liveBubbles(turnId) {
  let bubbles = view.live.get(turnId);
  if (!bubbles) {
    bubbles = { message: null, reasoning: null };
    view.live.set(turnId, bubbles);
  }
  return bubbles;
}

function render(envelope, parent, live) {
  const event = envelope.event;
  const turnId = envelope.turnId || event.turn_id;
  const facts = turnId ? turnFacts(turnId) : null;
  const at = parseTime(envelope.timestamp);
  switch (event.type) {
    case 'thread_created':
    {
      const node = row('note', envelope);
      node.textContent = 'thread created in ' + event.workspace;
      parent.append(node);
      return;
    }
    case 'turn_started': {
      facts.start = at;
      facts.seq = envelope.seq;
      facts.message = event.message;
      if (live) {
        view.runningTurnId = event.turn_id;
        renderHead();
        renderThreadList();
      }
      const node = row('turn-start', envelope);
      node.textContent = 'turn · ' + event.provider + '/' + event.model;
      parent.append(node);
      return;
    }
    case 'inference_started':
      facts.inferences.push(at);
      return;
    case 'message_delta': {
      const bubbles = liveBubbles(event.turn_id);
      if (!bubbles.message) {
        bubbles.message = row('assistant streaming', envelope);
        parent.append(bubbles.message);
      }
      bubbles.message.textContent += event.text;
      return;
    }
    case 'reasoning_delta': {
      const bubbles = liveBubbles(event.turn_id);
      if (!bubbles.reasoning) {
        bubbles.reasoning = row('reasoning streaming', envelope);
        const details = el('details');
        details.append(el('summary', null, 'reasoning…'), el('pre', 'reasoning-text', ''));
        bubbles.reasoning.append(details);
        parent.append(bubbles.reasoning);
      }
      bubbles.reasoning.querySelector('.reasoning-text').textContent += event.text;
      return;
    }
    case 'transcript_item_appended':
      return renderItem(envelope, parent, live);
    case 'usage_updated':
      facts.usage = event.turn_total;
      return;
    case 'tool_call_requested': {
      const card = toolCard(event.call_id, event.tool_name, parent, turnId);
      card.querySelector('.tool-name').textContent = event.tool_name;
      card.querySelector('.tool-args').textContent = prettyArgs(event.arguments);
      card.dataset.seq = envelope.seq;
      return;
    }
    case 'tool_call_started': {
      const card = toolCard(event.call_id, event.tool_name, parent, turnId);
      if (card.dataset.status === 'requested') setToolStatus(card, 'running');
      facts.tools.set(event.call_id, { name: event.tool_name, start: at, ms: null });
      return;
    }
    case 'file_change_preview_ready': {
      const card = toolCard(event.call_id, null, parent, turnId);
      card.querySelector('.tool-diffs').append(renderDiff(event.diff, event.path));
      card.dataset.diffs = 'shown';
      return;
    }
    case 'tool_call_completed': {
      const card = toolCard(event.call_id, event.tool_name, parent, turnId);
      const data = event.data || {};
      const exit = data.exit_code;
      let status = event.is_error ? 'failed' : 'done';
      let text = status;
      if (exit !== undefined && exit !== null) text += ' · exit ' + exit;
      setToolStatus(card, status, text);
      card.querySelector('.tool-time').textContent = formatMs(event.duration_ms);
      card.querySelector('.tool-output').textContent = event.output || '';
      if (card.dataset.diffs !== 'shown' && Array.isArray(data.file_changes)) {
        for (const change of data.file_changes) {
          card.querySelector('.tool-diffs').append(renderDiff(change.diff, change.path));
        }
        if (data.file_changes.length) card.dataset.diffs = 'shown';
      }
      const tool = facts.tools.get(event.call_id) || { name: event.tool_name, start: null };
      tool.ms = event.duration_ms;
      facts.tools.set(event.call_id, tool);
      return;
    }
    case 'approval_requested': {
      facts.approvals.set(event.approval_id, { start: at, end: null });
      const card = view.cards.get(event.call_id);
      if (card) setToolStatus(card, 'asking', 'waiting for approval');
      const node = row('note approval-note', envelope);
      node.textContent = 'approval asked: ' + (event.preview && event.preview.summary ? event.preview.summary : event.tool_name);
      parent.append(node);
      return;
    }
    case 'approval_resolved': {
      const asked = facts.approvals.get(event.approval_id) || { start: null };
      asked.end = at;
      facts.approvals.set(event.approval_id, asked);
      const node = row('note approval-note', envelope);
      node.textContent = 'approval: ' + decisionText(event.decision) + ' by ' + byText(event.by);
      parent.append(node);
      if (live) removeApprovalCard(event.approval_id);
      return;
    }
    case 'runner_lifecycle': {
      const action = event.action || '';
      if (action === 'provisioning') facts.provisionStart = at;
      else if (facts.provisionStart && (action === 'created' || action === 'resumed' || action === 'provisioning_failed' || action === 'rejoined')) {
        facts.provisionMs += at - facts.provisionStart;
        facts.provisionStart = null;
      }
      if (live) view.runnerAction = action.replace(/_/g, ' ');
      const node = row('note runner', envelope);
      node.textContent = 'sandbox ' + action.replace(/_/g, ' ') + (event.provider_id ? ' (' + event.provider_id + ')' : '');
      parent.append(node);
      if (live) refreshHeadSoon();
      return;
    }
    case 'context_compacted': {
      const node = row('note compaction', envelope);
      node.textContent = 'context compacted (' + event.trigger + '): ' + event.replaced_items + ' items, ' +
        event.tokens_before + ' → ' + event.tokens_after + ' tokens';
      const details = el('details');
      details.append(el('summary', null, 'summary'), el('pre', 'compaction-summary', event.summary));
      node.append(details);
      parent.append(node);
      return;
    }
    case 'thread_forked': {
      const node = row('note fork', envelope);
      const other = event.source_thread_id || '';
      node.textContent = 'forked at turn ' + event.at_turn + ' from ';
      if (other) {
        const link = el('a', null, other.slice(0, 8));
        link.href = '/threads/' + encodeURIComponent(other);
        link.addEventListener('click', (e) => { e.preventDefault(); navigate(other); });
        node.append(link);
      }
      parent.append(node);
      return;
    }
    case 'thread_rolled_back': {
      const node = row('note rollback', envelope);
      node.textContent = 'rolled back to turn ' + event.to_turn + ' (' + (event.rolled_back_turns || []).length + ' turns dropped from the context)';
      parent.append(node);
      return;
    }
    case 'workspace_checkpointed':
      return;
    case 'turn_completed':
    case 'turn_failed':
    case 'turn_interrupted':
    case 'turn_deadline_exceeded': {
      facts.end = at;
      facts.outcome = event.type.replace('turn_', '');
      const bubbles = view.live.get(event.turn_id);
      if (bubbles) {
        if (bubbles.reasoning) bubbles.reasoning.remove();
        if (bubbles.message) bubbles.message.remove();
        view.live.delete(event.turn_id);
      }
      // The answer is stored here, not as a transcript item.
      if (event.final_message && event.final_message !== facts.lastAnswer) {
        const answer = row('assistant', envelope);
        answer.textContent = event.final_message;
        parent.append(answer);
      }
      for (const card of view.cards.values()) {
        if (card.dataset.turnId === event.turn_id && card.dataset.status === 'running' || card.dataset.status === 'requested' || card.dataset.status === 'asking') {
          if (event.type !== 'turn_completed') setToolStatus(card, 'stopped', 'stopped');
        }
      }
      const node = row('turn-end ' + facts.outcome, envelope);
      let text = 'turn ' + facts.outcome.replace(/_/g, ' ');
      if (event.error) text += ': ' + event.error;
      if (event.deadline_seconds) text += ' (' + event.deadline_seconds + ' s)';
      if (event.usage) text += ' · ' + usageText(event.usage);
      node.textContent = text;
      parent.append(node);
      if (live) {
        view.runningTurnId = null;
        renderHead();
        renderThreadList();
        refreshHeadSoon();
        loadRewindTargets();
        for (const card of $('approvals').children) if (card.dataset.turnId === event.turn_id) card.remove();
      }
      return;
    }
    default: {
      const node = row('note other', envelope);
      node.textContent = event.type.replace(/_/g, ' ');
      parent.append(node);
    }
  }
}

function renderItem(envelope, parent, live) {
  const item = envelope.event.item || {};
  const turnId = envelope.event.turn_id;
  switch (item.type) {
    case 'user_message': {
      const node = row('user', envelope);
      node.textContent = item.text;
      parent.append(node);
      return;
    }
    case 'assistant_message': {
      if (turnId) turnFacts(turnId).lastAnswer = item.text;
      const node = row('assistant', envelope);
      node.textContent = item.text;
      const bubbles = live ? view.live.get(turnId) : null;
      if (bubbles && bubbles.message) {
        bubbles.message.replaceWith(node);
        bubbles.message = null;
      } else {
        parent.append(node);
      }
      return;
    }
    case 'reasoning': {
      const node = row('reasoning', envelope);
      const details = el('details');
      details.append(el('summary', null, 'reasoning'), el('pre', 'reasoning-text', item.text));
      node.append(details);
      const bubbles = live ? view.live.get(turnId) : null;
      if (bubbles && bubbles.reasoning) {
        bubbles.reasoning.replaceWith(node);
        bubbles.reasoning = null;
      } else {
        parent.append(node);
      }
      return;
    }
    default:
      // tool_call and tool_result are shown by the tool card.
      return;
  }
}

function formatMs(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return '';
  return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(1) + ' s';
}

let headTimer = null;
function refreshHeadSoon() {
  clearTimeout(headTimer);
  headTimer = setTimeout(async () => {
    if (!view) return;
    const current = view;
    try {
      const read = await call('thread/read', { threadId: current.id });
      if (view === current) {
        current.info = read.thread;
        current.runningTurnId = read.runningTurnId;
        renderHead();
      }
    } catch (error) { /* shown on the next action */ }
  }, 200);
}

// ---------------------------------------------------------------- timeline

function turnFacts(turnId) {
  let facts = view.turns.get(turnId);
  if (!facts) {
    facts = { turnId, start: null, end: null, outcome: null, message: '', inferences: [], tools: new Map(), approvals: new Map(), provisionStart: null, provisionMs: 0, usage: null };
    view.turns.set(turnId, facts);
  }
  return facts;
}

// Per turn: its length split into waiting for approval, provisioning, tools
// and the rest (the model), from the events on the page.
function renderTimeline() {
  const rows = [];
  const turns = Array.from(view.turns.values()).filter((facts) => facts.start !== null);
  turns.sort((a, b) => (a.start - b.start) || (a.seq - b.seq));
  const now = Date.now();
  const longest = Math.max(1, ...turns.map((facts) => (facts.end ?? now) - facts.start));
  for (const facts of turns.slice(-20)) {
    const total = Math.max(0, (facts.end ?? now) - facts.start);
    let approval = 0;
    for (const asked of facts.approvals.values()) {
      if (asked.start !== null) approval += (asked.end ?? now) - asked.start;
    }
    let tools = 0;
    const toolTitles = [];
    for (const tool of facts.tools.values()) {
      const ms = tool.ms ?? (tool.start !== null ? now - tool.start : 0);
      tools += ms;
      toolTitles.push((tool.name || 'tool') + ' ' + formatMs(ms));
    }
    const provisioning = facts.provisionMs;
    const model = Math.max(0, total - tools - approval - provisioning);
    const line = el('div', 'timeline-row');
    line.dataset.turnId = facts.turnId;
    line.append(el('span', 'timeline-label', (facts.message || '').slice(0, 40) + ' · ' + formatMs(total) + (facts.end ? '' : ' (running)')));
    const bar = el('div', 'timeline-bar');
    bar.style.width = Math.max(2, (100 * total) / longest) + '%';
    for (const [cls, ms, title] of [
      ['model', model, 'model ' + formatMs(model) + ' (' + facts.inferences.length + ' requests)'],
      ['tools', tools, 'tools ' + formatMs(tools) + ': ' + toolTitles.join(', ')],
      ['provisioning', provisioning, 'provisioning ' + formatMs(provisioning)],
      ['approval', approval, 'waiting for approval ' + formatMs(approval)],
    ]) {
      if (ms <= 0) continue;
      const part = el('span', 'segment ' + cls);
      part.style.flexGrow = String(ms);
      part.title = title;
      bar.append(part);
    }
    line.append(bar);
    line.append(el('span', 'timeline-split', 'model ' + formatMs(model) + ' · tools ' + formatMs(tools) + ' · provisioning ' + formatMs(provisioning) + ' · approval ' + formatMs(approval)));
    rows.push(line);
  }
  $('timeline').replaceChildren(...rows);
  followBottom();
}

// ---------------------------------------------------------------- approvals

function decisionText(decision) {
  return String(decision || '').replace(/_/g, ' ');
}

function byText(by) {
  if (!by) return '?';
  if (by.kind === 'client') return by.clientId || by.client_id || 'a client';
  return by.kind || JSON.stringify(by);
}

function onApprovalRequest(message) {
  const params = message.params || {};
  if (!view || params.threadId !== view.id) {
    // Another thread asks: this page only answers what it shows.
    if (rpc.ws) rpc.ws.send(JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: -32000, message: 'the page is showing another thread' } }));
    return;
  }
  const card = el('div', 'approval');
  card.dataset.approvalId = params.approvalId;
  card.dataset.turnId = params.turnId;
  card.append(el('div', 'approval-title', params.toolName + ' asks to ' + (params.kind || 'run')));
  const preview = params.preview || {};
  card.append(el('div', 'approval-summary', preview.summary || ''));
  if (preview.command) {
    card.append(el('pre', 'approval-command', preview.command.command + '\n# in ' + preview.command.cwd + ' (' + preview.command.runsOn.kind + ')'));
  }
  for (const file of preview.files || []) card.append(renderDiff(file.diff, file.path));
  if (!preview.command && !(preview.files || []).length) {
    card.append(el('pre', 'approval-args', JSON.stringify(preview.arguments, null, 2)));
  }
  if (params.rules && params.rules.length) card.append(el('div', 'approval-rules', 'rules: ' + params.rules.join(', ')));
  const buttons = el('div', 'approval-buttons');
  for (const decision of DECISIONS) {
    const button = el('button', 'decision ' + decision, decisionText(decision));
    button.type = 'button';
    button.dataset.decision = decision;
    button.addEventListener('click', () => {
      respond(message.id, { decision });
      for (const other of buttons.children) other.disabled = true;
      card.dataset.answered = decision;
    });
    buttons.append(button);
  }
  card.append(buttons);
  $('approvals').append(card);
  followBottom();
}

function onApprovalResolved(params) {
  removeApprovalCard(params.approvalId);
}

function removeApprovalCard(approvalId) {
  for (const card of Array.from($('approvals').children)) {
    if (card.dataset.approvalId === approvalId) card.remove();
  }
}

// ---------------------------------------------------------------- actions

async function act(what, action) {
  try {
    return await action();
  } catch (error) {
    toast(what + ' failed: ' + error.message);
    return null;
  }
}

async function loadRewindTargets() {
  const current = view;
  const result = await call('thread/rewindTargets', { threadId: current.id }).catch(() => null);
  if (view !== current) return;
  const pick = $('turn-pick');
  const options = [el('option', null, 'now')];
  options[0].value = '';
  for (const target of (result && result.targets) || []) {
    const option = el('option', null, 'turn ' + target.turn + ': ' + String(target.message || '').slice(0, 30));
    option.value = String(target.turn);
    options.push(option);
  }
  pick.replaceChildren(...options);
}

function wireActions() {
  $('composer').addEventListener('submit', (event) => {
    event.preventDefault();
    const text = $('message').value.trim();
    if (!view || !text) return;
    act('start turn', async () => {
      const started = await call('turn/start', { threadId: view.id, message: text });
      $('message').value = '';
      view.runningTurnId = started.turnId;
      renderHead();
    });
  });
  $('interrupt').addEventListener('click', () => {
    if (!view || !view.runningTurnId) return;
    const turnId = view.runningTurnId;
    act('interrupt', () => call('turn/interrupt', { threadId: view.id, turnId }));
  });
  $('mode').addEventListener('change', () => {
    const mode = $('mode').value || null;
    act('set mode', async () => {
      const result = await call('thread/setMode', { threadId: view.id, mode });
      view.info = result.thread;
      renderHead();
    });
  });
  $('fork').addEventListener('click', () => {
    const turn = $('turn-pick').value;
    const params = { threadId: view.id };
    if (turn) params.atTurn = Number(turn);
    act('fork', async () => {
      const result = await call('thread/fork', params);
      await refreshThreads();
      navigate(result.thread.threadId);
    });
  });
  $('rollback').addEventListener('click', () => {
    const turn = $('turn-pick').value;
    if (!turn) {
      toast('pick the turn to roll back to');
      return;
    }
    act('roll back', async () => {
      const result = await call('thread/rollback', { threadId: view.id, toTurn: Number(turn) });
      toast('rolled back ' + result.rolledBackTurns + ' turns');
      loadRewindTargets();
    });
  });
  $('pause').addEventListener('click', () => act('pause', async () => { await call('runners/pause', { threadId: view.id }); refreshHeadSoon(); toast('sandbox paused'); }));
  $('resume').addEventListener('click', () => act('resume', async () => { await call('runners/resume', { threadId: view.id }); refreshHeadSoon(); toast('sandbox resumed'); }));
  $('login').addEventListener('submit', (event) => {
    event.preventDefault();
    token = $('token').value;
    $('token').value = '';
    // Kept for this tab only (sessionStorage), never in a URL.
    sessionStorage.setItem('roder.token', token);
    connect();
  });
  $('home').addEventListener('click', (event) => {
    event.preventDefault();
    history.pushState(null, '', '/');
    route();
  });
  $('log').addEventListener('scroll', () => {
    const log = $('log');
    // Only a move up (the reader's) stops following; the page's own
    // scrolling only moves down. Being near the bottom resumes it.
    if (log.scrollHeight - log.scrollTop - log.clientHeight < 40) stickToBottom = true;
    else if (log.scrollTop < lastScrollTop - 2) stickToBottom = false;
    lastScrollTop = log.scrollTop;
    if (log.scrollTop < 200) loadOlder().catch((error) => toast(error.message));
  });
}

wireActions();
connect();
setInterval(() => {
  if (rpc.opened && rpc.ws && rpc.ws.readyState === WebSocket.OPEN) {
    refreshThreads();
    if (view && view.runningTurnId) renderTimeline();
  }
}, LIST_EVERY_MS);
