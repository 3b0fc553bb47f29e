/* SPDX-License-Identifier: MIT */
/*
 * libpypto: the HTML timeline of a run.
 *
 * One self-contained file (inline CSS and script, no network, no external
 * font) so it can be mailed, archived or opened on a machine without
 * access to anything: the run's data is a JSON blob in a
 * <script type="application/json" id="pypto-data"> element that the page's
 * own script draws as SVG: one lane per worker (compute and host
 * preprocessing), one per device (its transfers), one for the collectives
 * (allreduce tiles, issue to completion), a time axis, a rect per
 * event coloured by stage.  Hovering a tile shows its details and arrows
 * from its inputs and to its consumers.  The statistics and the diagnosis
 * are rendered by this file already, so they show even where scripts are
 * off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pypto_int.h"

/* Drawing more rects makes browsers crawl; the page says what it left. */
#define PYPTO_HTML_EVENTS_MAX	20000
#define PYPTO_HTML_EDGES_MAX	50000

/* Text for an HTML element's content. */
static void html_text(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	while (*p) {
		unsigned char c = *p;
		int n;

		if (c >= 0x80) {
			n = pypto__utf8_len(p);
			if (n) {
				fwrite(p, 1, n, f);
				p += n;
			} else {
				fputs("&#xfffd;", f);
				p++;
			}
			continue;
		}
		switch (c) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
				fputs("&#xfffd;", f);
			else
				putc(c, f);
		}
		p++;
	}
}

/* The diagnosis text (pypto_run_diagnose into memory); NULL on failure. */
static char *diagnosis_text(const struct pypto_run *r, unsigned int *mask)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	*mask = pypto_run_diagnose(r, m);
	if (fclose(m)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static const char html_head[] =
"<!DOCTYPE html>\n"
"<html lang=\"en\">\n"
"<head>\n"
"<meta charset=\"utf-8\">\n"
"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
"<title>pypto timeline</title>\n"
"<style>\n"
"body{margin:0;padding:12px 16px;font:13px/1.35 system-ui,sans-serif;"
"color:#222;background:#fafafa}\n"
"h1{font-size:18px;margin:0 0 8px}\n"
"#top{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}\n"
"table.stats{border-collapse:collapse;background:#fff;"
"border:1px solid #ddd}\n"
"table.stats td{padding:2px 8px;border-bottom:1px solid #eee;"
"white-space:nowrap}\n"
"table.stats td:first-child{color:#555}\n"
"pre#diag{margin:0;padding:6px 10px;background:#fff;border:1px solid #ddd;"
"font:12px/1.4 monospace;white-space:pre-wrap;max-width:900px}\n"
"pre#diag.bad{border-color:#d62728}\n"
"#legend{margin:10px 0 6px;display:flex;gap:14px;flex-wrap:wrap;"
"align-items:center}\n"
"#legend span.sw{display:inline-block;width:14px;height:10px;"
"margin-right:4px;vertical-align:middle;border:1px solid #0003}\n"
"#note{color:#8a5a00;margin:4px 0}\n"
"#error{display:none;color:#fff;background:#d62728;padding:6px 10px;"
"margin:6px 0;white-space:pre-wrap;font-family:monospace}\n"
"#chartbox{background:#fff;border:1px solid #ddd;overflow-x:hidden;"
"overflow-y:auto;max-height:78vh;position:relative;cursor:crosshair}\n"
"#chart{display:block;user-select:none}\n"
"#chart text{font:11px system-ui,sans-serif;fill:#333}\n"
"#chart .axis line{stroke:#ccc}\n"
"#chart .lanebg{fill:#f4f6f8}\n"
"rect.tile{stroke:#0002;stroke-width:0.5}\n"
"rect.tile.s1{fill:#59a14f}\n"
"rect.tile.s2{fill:#f28e2b}\n"
"rect.tile.s3{fill:#4e79a7}\n"
"rect.tile.s4{fill:#b07aa1}\n"
"rect.tile.retry{stroke:#d62728;stroke-width:1.5}\n"
"rect.tile.hl{stroke:#000;stroke-width:1.5}\n"
".dep{fill:none;stroke:#222;stroke-width:1.2;opacity:.8}\n"
".dep.out{stroke:#d62728}\n"
"#tip{position:fixed;display:none;pointer-events:none;background:#222e;"
"color:#fff;padding:6px 8px;border-radius:4px;font:12px/1.4 monospace;"
"white-space:pre;z-index:10}\n"
"#help{color:#777;font-size:12px;margin:4px 0}\n"
"</style>\n"
"</head>\n";

static const char html_script[] =
"<script>\n"
"(function () {\n"
"'use strict';\n"
"var body = document.body;\n"
"function fail(e) {\n"
"  var el = document.getElementById('error');\n"
"  el.textContent = 'timeline render failed: ' +\n"
"    (e && e.stack ? e.stack : String(e));\n"
"  el.style.display = 'block';\n"
"  body.dataset.error = '1';\n"
"  document.title = 'pypto timeline: error';\n"
"}\n"
"function fmt(ns) {\n"
"  var a = Math.abs(ns);\n"
"  if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';\n"
"  if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';\n"
"  if (a >= 1e3) return (ns / 1e3).toFixed(3) + ' us';\n"
"  return Math.round(ns) + ' ns';\n"
"}\n"
"function fmtBytes(b) {\n"
"  if (b >= 1073741824) return (b / 1073741824).toFixed(2) + ' GiB';\n"
"  if (b >= 1048576) return (b / 1048576).toFixed(2) + ' MiB';\n"
"  if (b >= 1024) return (b / 1024).toFixed(2) + ' KiB';\n"
"  return b + ' B';\n"
"}\n"
"try {\n"
"  var D = JSON.parse(document.getElementById('pypto-data').textContent);\n"
"  var svg = document.getElementById('chart');\n"
"  var box = document.getElementById('chartbox');\n"
"  var tip = document.getElementById('tip');\n"
"  var NS = svg.namespaceURI;\n"
"  var EV = D.events,\n"
"      STAGES = ['', 'prefetch', 'transfer', 'compute', 'collective'];\n"
"  var nw = D.lanes_workers, nd = D.lanes_devices,\n"
"      nc = D.lanes_coll || 0, nl = nw + nd + nc;\n"
"  var LANE_H = nl <= 12 ? 28 : 18, LABEL_W = 160, AXIS_H = 22,\n"
"      RIGHT = 10;\n"
"  function el(name, attrs, parent) {\n"
"    var e = document.createElementNS(NS, name), k;\n"
"    for (k in attrs) e.setAttribute(k, attrs[k]);\n"
"    if (parent) parent.appendChild(e);\n"
"    return e;\n"
"  }\n"
"  function lane(e) {\n"
"    if (e[5] === 4) return nw + nd;\n"
"    return e[5] === 2 ? nw + Math.max(e[4], 0) : e[3];\n"
"  }\n"
"  var tEnd = D.wall_ns, i, j;\n"
"  for (i = 0; i < EV.length; i++) if (EV[i][1] > tEnd) tEnd = EV[i][1];\n"
"  if (!(tEnd > 0)) tEnd = 1;\n"
"  var v0 = 0, v1 = tEnd;\n"
"  /* transfers in flight at once get sub-rows of their device lane */\n"
"  var SUBMAX = 6, sub = new Array(EV.length), ends = [], k;\n"
"  for (i = 0; i < nl; i++) ends.push([0]);\n"
"  for (i = 0; i < EV.length; i++) {\n"
"    var re = ends[lane(EV[i])];\n"
"    for (k = 0; k < re.length && re[k] > EV[i][0]; k++);\n"
"    if (k === re.length) {\n"
"      if (re.length < SUBMAX) re.push(0);\n"
"      else for (k = 0, j = 1; j < re.length; j++) if (re[j] < re[k]) k = j;\n"
"    }\n"
"    if (EV[i][1] > re[k]) re[k] = EV[i][1];\n"
"    sub[i] = k;\n"
"  }\n"
"  var laneY = [], laneH = [], H = AXIS_H;\n"
"  for (i = 0; i < nl; i++) {\n"
"    laneY.push(H);\n"
"    laneH.push(Math.max(LANE_H, ends[i].length * 10 + 4));\n"
"    H += laneH[i];\n"
"  }\n"
"  H += 6;\n"
"  var W = Math.max(600, box.clientWidth || 1200);\n"
"  svg.setAttribute('width', W);\n"
"  svg.setAttribute('height', H);\n"
"  var gLanes = el('g', {}, svg), gAxis = el('g', {'class': 'axis'}, svg);\n"
"  var gTiles = el('g', {}, svg), gDeps = el('g', {}, svg);\n"
"  var gLabels = el('g', {}, svg);\n"
"  el('rect', {x: 0, y: 0, width: LABEL_W, height: H, fill: '#fff'},\n"
"     gLabels);\n"
"  for (i = 0; i < nl; i++) {\n"
"    if (i % 2) el('rect', {'class': 'lanebg', x: LABEL_W, y: laneY[i],\n"
"      width: W - LABEL_W, height: laneH[i]}, gLanes);\n"
"    var t = el('text', {x: 6, y: laneY[i] + laneH[i] / 2 + 4}, gLabels);\n"
"    t.textContent = i < nw ? 'worker ' + i : i < nw + nd ?\n"
"      'device ' + (i - nw) + ' transfers' : 'allreduces';\n"
"  }\n"
"  if (nd || nc) el('line', {x1: 0, x2: W, y1: laneY[nw], y2: laneY[nw],\n"
"    stroke: '#999'}, gLabels);\n"
"  function rowH(l) { return (laneH[l] - 4) / ends[l].length; }\n"
"  function top(i) { var l = lane(EV[i]); return laneY[l] + 2 +\n"
"    sub[i] * rowH(l); }\n"
"  function X(t) { return LABEL_W + (t - v0) * (W - LABEL_W - RIGHT) /\n"
"    (v1 - v0); }\n"
"  var rects = new Array(EV.length), first = {}, last = {};\n"
"  for (i = 0; i < EV.length; i++) {\n"
"    var e = EV[i];\n"
"    var r = el('rect', {'class': 'tile s' + e[5] +\n"
"      (e[6] > 0 ? ' retry' : ''), 'data-tile': e[2], 'data-i': i,\n"
"      y: top(i), height: rowH(lane(e)) - (ends[lane(e)].length > 1)},\n"
"      gTiles);\n"
"    rects[i] = r;\n"
"    if (!(e[2] in first)) first[e[2]] = i;\n"
"    if (!(e[2] in last) || e[1] >= EV[last[e[2]]][1]) last[e[2]] = i;\n"
"  }\n"
"  var inputs = {}, consumers = {};\n"
"  for (i = 0; i < D.edges.length; i++) {\n"
"    var a = D.edges[i][0], b = D.edges[i][1];\n"
"    (inputs[b] = inputs[b] || []).push(a);\n"
"    (consumers[a] = consumers[a] || []).push(b);\n"
"  }\n"
"  function ticks() {\n"
"    while (gAxis.firstChild) gAxis.removeChild(gAxis.firstChild);\n"
"    var span = v1 - v0, raw = span / 8;\n"
"    var p = Math.pow(10, Math.floor(Math.log10(raw))), step = p;\n"
"    if (raw / p >= 5) step = 5 * p; else if (raw / p >= 2) step = 2 * p;\n"
"    /* steps are 1, 2 or 5 x 10^k ns: whole numbers of one unit */\n"
"    var u = step >= 1e9 ? [1e9, ' s'] : step >= 1e6 ? [1e6, ' ms'] :\n"
"      step >= 1e3 ? [1e3, ' us'] : [1, ' ns'];\n"
"    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {\n"
"      var x = X(t);\n"
"      el('line', {x1: x, x2: x, y1: AXIS_H - 4, y2: H}, gAxis);\n"
"      if (x > W - 50) continue;\n"
"      var tx = el('text', {x: x + 2, y: AXIS_H - 8}, gAxis);\n"
"      tx.textContent = Math.round(t / u[0]) + u[1];\n"
"    }\n"
"  }\n"
"  var hover = -1;\n"
"  function layout() {\n"
"    for (var i = 0; i < EV.length; i++) {\n"
"      var x0 = X(EV[i][0]), x1 = X(EV[i][1]);\n"
"      rects[i].setAttribute('x', x0.toFixed(2));\n"
"      rects[i].setAttribute('width', Math.max(1, x1 - x0).toFixed(2));\n"
"    }\n"
"    ticks();\n"
"    if (hover >= 0) deps(hover);\n"
"  }\n"
"  function cy(i) { return top(i) + rowH(lane(EV[i])) / 2; }\n"
"  function arrow(from, to, cls) {\n"
"    var xa = X(EV[from][1]), ya = cy(from), xb = X(EV[to][0]),\n"
"        yb = cy(to), mx = (xa + xb) / 2;\n"
"    el('path', {'class': 'dep ' + cls, 'marker-end': 'url(#arrow)',\n"
"      d: 'M' + xa + ',' + ya + ' C' + mx + ',' + ya + ' ' + mx + ',' +\n"
"      yb + ' ' + xb + ',' + yb}, gDeps);\n"
"  }\n"
"  function deps(i) {\n"
"    while (gDeps.firstChild) gDeps.removeChild(gDeps.firstChild);\n"
"    var t = EV[i][2], k, l;\n"
"    l = inputs[t] || [];\n"
"    for (k = 0; k < l.length; k++)\n"
"      if (l[k] in last) arrow(last[l[k]], first[t], 'in');\n"
"    l = consumers[t] || [];\n"
"    for (k = 0; k < l.length; k++)\n"
"      if (l[k] in first) arrow(last[t], first[l[k]], 'out');\n"
"  }\n"
"  function show(i, ev) {\n"
"    var e = EV[i], info = D.tiles[e[2]] || ['t' + e[2], 'unknown'];\n"
"    tip.textContent = info[0] + '\\n' +\n"
"      'tile      ' + e[2] + ' (' + info[1] + ')\\n' +\n"
"      'stage     ' + STAGES[e[5]] +\n"
"      (e[6] > 0 ? ' (retry ' + e[6] + ')' : '') + '\\n' +\n"
"      'worker    ' + (e[3] === 65535 ? '-' : e[3]) + '\\n' +\n"
"      'device    ' + e[4] + '\\n' +\n"
"      'start     ' + fmt(e[0]) + '\\n' +\n"
"      'duration  ' + fmt(e[1] - e[0]) + '\\n' +\n"
"      'bytes     ' + fmtBytes(e[7]) + '\\n' +\n"
"      'inputs    ' + (inputs[e[2]] || []).length + ', consumers ' +\n"
"      (consumers[e[2]] || []).length;\n"
"    tip.style.display = 'block';\n"
"    var x = ev.clientX + 14, y = ev.clientY + 14;\n"
"    if (x + tip.offsetWidth > window.innerWidth)\n"
"      x = ev.clientX - tip.offsetWidth - 8;\n"
"    if (y + tip.offsetHeight > window.innerHeight)\n"
"      y = ev.clientY - tip.offsetHeight - 8;\n"
"    tip.style.left = x + 'px';\n"
"    tip.style.top = y + 'px';\n"
"  }\n"
"  svg.addEventListener('mouseover', function (ev) {\n"
"    var t = ev.target;\n"
"    if (!t.classList || !t.classList.contains('tile')) return;\n"
"    if (hover >= 0) rects[hover].classList.remove('hl');\n"
"    hover = +t.getAttribute('data-i');\n"
"    t.classList.add('hl');\n"
"    show(hover, ev);\n"
"    deps(hover);\n"
"  });\n"
"  svg.addEventListener('mousemove', function (ev) {\n"
"    if (hover >= 0 && ev.target === rects[hover]) show(hover, ev);\n"
"  });\n"
"  svg.addEventListener('mouseout', function (ev) {\n"
"    if (hover < 0 || ev.target !== rects[hover]) return;\n"
"    rects[hover].classList.remove('hl');\n"
"    hover = -1;\n"
"    tip.style.display = 'none';\n"
"    while (gDeps.firstChild) gDeps.removeChild(gDeps.firstChild);\n"
"  });\n"
"  function tAt(clientX) {\n"
"    var x = clientX - svg.getBoundingClientRect().left;\n"
"    return v0 + (x - LABEL_W) * (v1 - v0) / (W - LABEL_W - RIGHT);\n"
"  }\n"
"  svg.addEventListener('wheel', function (ev) {\n"
"    /* a plain wheel scrolls the lanes when they overflow */\n"
"    if (!ev.ctrlKey && !ev.shiftKey &&\n"
"        box.scrollHeight > box.clientHeight + 1) return;\n"
"    var d = ev.deltaY || ev.deltaX;\n"
"    if (!d) return;\n"
"    ev.preventDefault();\n"
"    var t = Math.min(Math.max(tAt(ev.clientX), v0), v1);\n"
"    var f = d < 0 ? 0.8 : 1.25;\n"
"    var n0 = t - (t - v0) * f, n1 = t + (v1 - t) * f;\n"
"    if (n1 - n0 < 10) return;\n"
"    v0 = Math.max(0, n0); v1 = Math.min(tEnd, n1);\n"
"    if (v1 <= v0) { v0 = 0; v1 = tEnd; }\n"
"    layout();\n"
"  }, {passive: false});\n"
"  var drag = null;\n"
"  svg.addEventListener('mousedown', function (ev) {\n"
"    drag = {x: ev.clientX, v0: v0, v1: v1};\n"
"  });\n"
"  window.addEventListener('mouseup', function () { drag = null; });\n"
"  window.addEventListener('mousemove', function (ev) {\n"
"    if (!drag) return;\n"
"    var dt = (ev.clientX - drag.x) * (drag.v1 - drag.v0) /\n"
"      (W - LABEL_W - RIGHT), span = drag.v1 - drag.v0;\n"
"    v0 = Math.min(Math.max(0, drag.v0 - dt), tEnd - span);\n"
"    v1 = v0 + span;\n"
"    layout();\n"
"  });\n"
"  svg.addEventListener('dblclick', function () {\n"
"    v0 = 0; v1 = tEnd; layout();\n"
"  });\n"
"  layout();\n"
"  /* #hover=I shows event I as if hovered (for screenshots/tests) */\n"
"  var hm = /^#hover=([0-9]+)$/.exec(location.hash);\n"
"  if (hm && +hm[1] < EV.length) {\n"
"    var hr = rects[+hm[1]].getBoundingClientRect();\n"
"    rects[+hm[1]].dispatchEvent(new MouseEvent('mouseover', {\n"
"      bubbles: true, clientX: hr.left + hr.width / 2,\n"
"      clientY: hr.top + hr.height / 2}));\n"
"    body.dataset.deps = String(gDeps.querySelectorAll('.dep').length);\n"
"  }\n"
"  var drawn = svg.querySelectorAll('rect.tile').length;\n"
"  body.dataset.tiles = String(drawn);\n"
"  document.title = 'pypto timeline: ' + drawn + ' tiles';\n"
"} catch (e) {\n"
"  fail(e);\n"
"}\n"
"})();\n"
"</script>\n";

static void stat_row(FILE *f, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void stat_row(FILE *f, const char *name, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fputs("<tr><td>", f);
	html_text(f, name);
	fputs("</td><td>", f);
	html_text(f, buf);
	fputs("</td></tr>\n", f);
}

static void html_stats(FILE *f, const struct pypto_run *r, uint32_t workers,
		       uint32_t devices)
{
	const struct pypto_stats *st = &r->st;
	char b1[32];

	fputs("<table class=\"stats\">\n", f);
	stat_row(f, "transport", "%s", r->xport_name ? r->xport_name : "none");
	stat_row(f, "result", "%s", r->status ? pypto_strerror(r->status) :
		 "ok");
	stat_row(f, "workers / devices", "%u / %u", workers, devices);
	stat_row(f, "wall time", "%s", pypto__fmt_ns(b1, sizeof(b1),
						(double)st->wall_ns));
	stat_row(f, "tiles", "%u (%" PRIu64 " compute, %" PRIu64 " transfer, %"
		 PRIu64 " host, %" PRIu64 " allreduce)", st->tiles,
		 st->tiles_compute, st->tiles_transfer, st->tiles_host,
		 st->tiles_allreduce);
	stat_row(f, "worker utilisation", "%.1f %%", st->worker_util * 100);
	stat_row(f, "transfer engine busy", "%.1f %%", st->xfer_util * 100);
	stat_row(f, "overlap efficiency", "%.1f %%", st->overlap_eff * 100);
	if (st->coll_flight_ns)
		stat_row(f, "allreduce overlap", "%.1f %% of %s in flight",
			 100.0 * (double)st->coll_overlap_ns /
			 (double)st->coll_flight_ns,
			 pypto__fmt_ns(b1, sizeof(b1),
				       (double)st->coll_flight_ns));
	stat_row(f, "compute tile time", "mean %s, cv %.3f",
		 pypto__fmt_ns(b1, sizeof(b1), st->tile_mean_ns), st->tile_cv);
	stat_row(f, "steals", "%" PRIu64 " of %" PRIu64 " attempts",
		 st->steals, st->steal_attempts);
	stat_row(f, "transfer rounds", "%" PRIu64 " (%.1f descriptors each)",
		 st->rounds, st->rounds ? (double)st->descs /
		 (double)st->rounds : 0.0);
	stat_row(f, "retries", "%" PRIu64 " (%" PRIu64 " failed descriptors)",
		 st->xfer_retries, st->xfer_failures);
	stat_row(f, "events", "%u", r->nev);
	fputs("</table>\n", f);
}

/* The data element's JSON.  drawn: events that go in (the first ones). */
static int html_data(FILE *f, const struct pypto_run *r, uint32_t drawn,
		     uint32_t workers, uint32_t lanes_w, uint32_t lanes_d,
		     uint32_t lanes_c, const char *diag, unsigned int mask)
{
	const struct pypto_graph *g = r->g;
	const struct pypto_stats *st = &r->st;
	uint64_t nedges = 0, edges_total = 0;
	bool *has = NULL, sep;
	uint32_t i, t;

	if (g && g->n) {
		has = calloc(g->n, sizeof(*has));
		if (!has)
			return pypto__fail(PYPTO_ERR_NOMEM, "no memory for the "
					   "timeline of %u tiles", g->n);
		for (i = 0; i < drawn; i++)
			if (r->ev[i].tile < g->n)
				has[r->ev[i].tile] = true;
	}

	fputs("{\"version\":1,\"transport\":", f);
	pypto__json_str(f, r->xport_name ? r->xport_name : "none", true);
	fprintf(f, ",\"status\":%d,\"workers\":%u,\"devices\":%u,"
		"\"lanes_workers\":%u,\"lanes_devices\":%u,\"lanes_coll\":%u,"
		"\"wall_ns\":%" PRIu64 ",\"events_total\":%u,\"drawn\":%u,"
		"\"mask\":%u,\"diagnosis\":", r->status, workers,
		r->cfg.devices ? r->cfg.devices : st->devices, lanes_w,
		lanes_d, lanes_c, st->wall_ns, r->nev, drawn, mask);
	pypto__json_str(f, diag ? diag : "", true);
	fputs(",\"stats\":{\"worker_util\":", f);
	pypto__json_num(f, st->worker_util);
	fputs(",\"xfer_util\":", f);
	pypto__json_num(f, st->xfer_util);
	fputs(",\"overlap_eff\":", f);
	pypto__json_num(f, st->overlap_eff);
	fputs(",\"tile_mean_ns\":", f);
	pypto__json_num(f, st->tile_mean_ns);
	fputs(",\"tile_cv\":", f);
	pypto__json_num(f, st->tile_cv);
	fprintf(f, ",\"tiles\":%u,\"steals\":%" PRIu64 ",\"rounds\":%" PRIu64
		",\"descs\":%" PRIu64 ",\"retries\":%" PRIu64 "}",
		st->tiles, st->steals, st->rounds, st->descs,
		st->xfer_retries);

	/* [t0, t1, tile, worker, device, stage, attempt, bytes] */
	fputs(",\"fields\":[\"t0\",\"t1\",\"tile\",\"worker\",\"device\","
	      "\"stage\",\"attempt\",\"bytes\"],\n\"events\":[", f);
	for (i = 0; i < drawn; i++) {
		const struct pypto_event *e = &r->ev[i];

		fprintf(f, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu32 ",%u,%" PRId32
			",%u,%u,%" PRIu64 "]", i ? ",\n" : "", e->t0_ns,
			e->t1_ns, e->tile, e->worker, e->device, e->stage,
			e->attempt, e->bytes);
	}

	/* Names and kinds of the tiles drawn (tiles outside the graph get
	 * "t<id>" in the page). */
	fputs("],\n\"tiles\":{", f);
	sep = false;
	for (t = 0; has && t < g->n; t++) {
		if (!has[t])
			continue;
		fprintf(f, "%s\"%" PRIu32 "\":[", sep ? ",\n" : "", t);
		if (g->tiles[t].name[0]) {
			pypto__json_str(f, g->tiles[t].name, true);
		} else {
			fprintf(f, "\"t%" PRIu32 "\"", t);
		}
		fprintf(f, ",\"%s\"]", pypto__kind_name(g->tiles[t].kind));
		sep = true;
	}

	/* Edges between drawn tiles, for the hover arrows. */
	fputs("},\n\"edges\":[", f);
	for (t = 0; has && t < g->n; t++) {
		const struct pypto_tile *tl = &g->tiles[t];

		if (!has[t])
			continue;
		for (i = 0; i < tl->nconsumers; i++) {
			uint32_t c = tl->consumers[i];

			if (c >= g->n || !has[c])
				continue;
			edges_total++;
			if (nedges >= PYPTO_HTML_EDGES_MAX)
				continue;
			fprintf(f, "%s[%" PRIu32 ",%" PRIu32 "]",
				nedges ? "," : "", t, c);
			nedges++;
		}
	}
	fprintf(f, "],\"edges_total\":%" PRIu64 ",\"edges_drawn\":%" PRIu64
		"}", edges_total, nedges);
	free(has);
	return 0;
}

static int html_file(FILE *f, const void *arg)
{
	const struct pypto_run *r = arg;
	uint32_t workers = r->cfg.workers ? r->cfg.workers : r->st.workers;
	uint32_t devices = r->cfg.devices ? r->cfg.devices : r->st.devices;
	uint32_t drawn = r->nev < PYPTO_HTML_EVENTS_MAX ? r->nev :
			 PYPTO_HTML_EVENTS_MAX;
	uint32_t lanes_w = workers, lanes_d = 0, lanes_c = 0, i;
	unsigned int mask = 0;
	char *diag;
	int ret;

	/* Lanes: every configured worker (an idle one is worth seeing) and
	 * every device with a transfer, plus any an event names beyond. */
	for (i = 0; i < drawn; i++) {
		const struct pypto_event *e = &r->ev[i];

		if (e->stage == PYPTO_STAGE_COLLECTIVE) {
			lanes_c = 1;
		} else if (e->stage == PYPTO_STAGE_TRANSFER) {
			uint32_t d = e->device > 0 ? (uint32_t)e->device : 0;

			if (d + 1 > lanes_d)
				lanes_d = d + 1;
		} else if (e->worker + 1U > lanes_w) {
			lanes_w = e->worker + 1U;
		}
	}
	if (lanes_d && lanes_d < devices)
		lanes_d = devices;

	diag = diagnosis_text(r, &mask);
	fputs(html_head, f);
	fputs("<body>\n<h1>pypto timeline</h1>\n<div id=\"top\">\n", f);
	html_stats(f, r, workers, devices);
	fprintf(f, "<pre id=\"diag\"%s>", mask ? " class=\"bad\"" : "");
	html_text(f, diag ? diag : "(diagnosis unavailable: out of memory)\n");
	fputs("</pre>\n</div>\n", f);
	fputs("<div id=\"legend\">"
	      "<span><span class=\"sw\" style=\"background:#4e79a7\"></span>"
	      "compute</span>"
	      "<span><span class=\"sw\" style=\"background:#f28e2b\"></span>"
	      "transfer</span>"
	      "<span><span class=\"sw\" style=\"background:#59a14f\"></span>"
	      "prefetch (host)</span>"
	      "<span><span class=\"sw\" style=\"background:#b07aa1\"></span>"
	      "allreduce</span>"
	      "<span><span class=\"sw\" style=\"background:#fff;border:2px "
	      "solid #d62728\"></span>retry</span>"
	      "<span><svg width=\"28\" height=\"10\"><path d=\"M1,5 H24\" "
	      "stroke=\"#222\" stroke-width=\"1.5\"/></svg>input</span>"
	      "<span><svg width=\"28\" height=\"10\"><path d=\"M1,5 H24\" "
	      "stroke=\"#d62728\" stroke-width=\"1.5\"/></svg>consumer</span>"
	      "</div>\n", f);
	if (drawn < r->nev)
		fprintf(f, "<div id=\"note\">%u events: the first %u (by start "
			"time) are drawn.</div>\n", r->nev, drawn);
	fputs("<div id=\"help\">hover a tile for details and its dependency "
	      "arrows; wheel (shift/ctrl + wheel when the lanes scroll) "
	      "zooms, drag pans, double-click resets</div>\n"
	      "<div id=\"error\"></div>\n"
	      "<div id=\"chartbox\"><svg id=\"chart\" width=\"1200\" "
	      "height=\"40\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" "
	      "refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
	      "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" "
	      "fill=\"#444\"/></marker></defs></svg></div>\n"
	      "<div id=\"tip\"></div>\n"
	      "<script type=\"application/json\" id=\"pypto-data\">", f);
	ret = html_data(f, r, drawn, workers, lanes_w, lanes_d, lanes_c, diag,
			mask);
	free(diag);
	if (ret)
		return ret;
	fputs("</script>\n", f);
	fputs(html_script, f);
	fputs("</body>\n</html>\n", f);
	return 0;
}

PYPTO_EXPORT int pypto_run_write_html(const struct pypto_run *r,
				      const char *path)
{
	if (!r || !path || !*path)
		return pypto__fail(PYPTO_ERR_INVAL, "write html: %s",
				   r ? "no path" : "NULL run");
	return pypto__write_path(path, "write html", html_file, r);
}
