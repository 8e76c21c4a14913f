// One thread: its last page first, older pages on scroll, live events
// after, and the view that follows the newest ones.
'use strict';

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
