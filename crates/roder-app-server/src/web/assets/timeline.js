// Per turn, where the time went.
'use strict';

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
