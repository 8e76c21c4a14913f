// The page's state and its JSON-RPC connection to the server it was
// served from (the token, when it has one, as a subprotocol).
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
