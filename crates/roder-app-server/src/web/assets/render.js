// Each event as it shows on the page. Text is only ever set as
// textContent, never parsed as HTML.
'use strict';

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
