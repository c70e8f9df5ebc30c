// The status page, live: each event from /events/stream is added to the list, and the
// sections marked data-live are swapped for a fresh server render (debounced), so one
// renderer (the server's) draws everything. Without this script the page is complete, only
// not live. Credentials: the browser's own (HTTP Basic, sent with every same-origin request).
(function () {
  'use strict';
  window.whillyLoadedAt = window.whillyLoadedAt || Date.now();
  var body = document.body;
  var last = Number(body.getAttribute('data-last-event')) || 0;
  var types = [];
  try { types = JSON.parse(body.getAttribute('data-event-types') || '[]'); } catch (e) { types = []; }
  var conn = document.getElementById('conn');
  var KEEP = 50;
  // Absolute and without user:password@ (a page opened with them resolves relative URLs with
  // them too, which fetch refuses); the browser sends its Basic credentials by itself.
  var here = location.protocol + '//' + location.host;

  function age(s) {
    s = Math.max(0, Math.floor(s));
    function p(n) { return (n < 10 ? '0' : '') + n; }
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + p(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + p(Math.floor(s % 3600 / 60)) + 'm';
    return Math.floor(s / 86400) + 'd ' + p(Math.floor(s % 86400 / 3600)) + 'h';
  }
  function tick() {
    var els = document.querySelectorAll('[data-since]');
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute('data-since'));
      if (!isNaN(t)) els[i].textContent = age((Date.now() - t) / 1000);
    }
  }
  setInterval(tick, 1000);

  var timer = null, busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(here + location.pathname + location.search, { headers: { Accept: 'text/html' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        var secs = document.querySelectorAll('[data-live]');
        for (var i = 0; i < secs.length; i++) {
          var fresh = doc.getElementById(secs[i].id);
          if (fresh) secs[i].innerHTML = fresh.innerHTML;
        }
        var meta = doc.querySelector('header .meta');
        var mine = document.querySelector('header .meta');
        if (meta && mine) mine.innerHTML = meta.innerHTML;
        tick();
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () { busy = false; if (again) { again = false; later(); } });
  }
  function later() {
    if (timer) return;
    timer = setTimeout(function () { timer = null; refresh(); }, 300);
  }

  function item(e) {
    var li = document.createElement('li');
    li.className = 'new';
    li.setAttribute('data-id', e.id);
    var t = document.createElement('time');
    t.title = e.ts || '';
    t.textContent = String(e.ts || '').slice(11, 19);
    var b = document.createElement('b');
    b.textContent = e.event_type;
    var subj = document.createElement('span');
    subj.className = 'subj';
    subj.textContent = [e.plan_id, e.task_id].filter(Boolean).join('/') +
      (e.from_status && e.to_status ? ' ' + e.from_status + ' → ' + e.to_status : '');
    var code = document.createElement('code');
    var p = e.payload == null || (typeof e.payload === 'object' && !Object.keys(e.payload).length) ? '' : JSON.stringify(e.payload);
    code.textContent = p.length > 160 ? p.slice(0, 159) + '…' : p;
    li.append(t, ' ', b, ' ', subj, ' ', code);
    return li;
  }
  function add(e) {
    var list = document.getElementById('event-list');
    if (!list) return;
    list.insertBefore(item(e), list.firstChild);
    while (list.children.length > KEEP) list.removeChild(list.lastChild);
  }

  if (!window.EventSource) return;
  var es = new EventSource(here + '/events/stream?after=' + last);
  function on(m) {
    var e;
    try { e = JSON.parse(m.data); } catch (x) { return; }
    if (!(e.id > last)) return;
    last = e.id;
    add(e);
    later();
  }
  for (var i = 0; i < types.length; i++) es.addEventListener(types[i], on);
  es.onmessage = on;
  es.onopen = function () { conn.textContent = 'live'; conn.className = 'conn on'; };
  es.onerror = function () { conn.textContent = 'reconnecting…'; conn.className = 'conn off'; };
})();
