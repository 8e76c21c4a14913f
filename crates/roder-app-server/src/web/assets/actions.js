// Approvals answered by a click, the buttons, and the start of the page.
'use strict';

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
