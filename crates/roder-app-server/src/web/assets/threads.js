// The thread list (polled) and the page's addresses: `/` and
// `/threads/ID`.
'use strict';

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
