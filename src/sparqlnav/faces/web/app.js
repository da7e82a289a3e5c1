/* The sparqlnav web UI: a chat whose answers show their streamed steps, the final SPARQL (highlighted,
   copyable, editable, re-runnable), the results with labels and clickable IRIs, and the answer; plus a
   plain SPARQL editor. The chat is one conversation on the server: follow-ups build on earlier turns, any
   earlier answer can be refined, an edited query goes with the next question, and "New conversation"
   starts over. Plain browser JavaScript; everything it loads comes from this server. */
(function () {
  "use strict";

  const $ = (sel) => document.querySelector(sel);
  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const XSD = "http://www.w3.org/2001/XMLSchema#";
  // conversation: the server's id of this thread; refine: the turn the next question refines; edit: the
  // user's own edit of a query, sent with the next question as a turn of its own.
  const state = { info: null, busy: false, conversation: null, refine: null, edit: null, welcome: null, examples: null };

  // -- HTTP ---------------------------------------------------------------------------------------

  function headers(json) {
    const h = {};
    if (json) h["Content-Type"] = "application/json";
    const token = localStorage.getItem("sparqlnav-token");
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  async function problem(resp) {
    let detail = resp.status + " " + resp.statusText;
    let body = null;
    try {
      body = await resp.json();
      if (body && body.detail) detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    } catch (_) { /* not JSON: keep the status line */ }
    if (resp.status === 401) notice("The server wants an API token: click “Token” to set it.", "error");
    const err = new Error(detail);
    err.body = body;  // e.g. a syntax error's line and column
    return err;
  }

  async function getJSON(url) {
    const resp = await fetch(url, { headers: headers(false) });
    if (!resp.ok) throw await problem(resp);
    return resp.json();
  }

  async function postJSON(url, body) {
    const resp = await fetch(url, { method: "POST", headers: headers(true), body: JSON.stringify(body) });
    if (!resp.ok) throw await problem(resp);
    return resp.json();
  }

  /** POST and read server-sent events; calls onEvent(name, data) for each. */
  async function postStream(url, body, onEvent) {
    const resp = await fetch(url, {
      method: "POST",
      headers: Object.assign(headers(true), { Accept: "text/event-stream" }),
      body: JSON.stringify(body),
    });
    if (!resp.ok) throw await problem(resp);
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of frame.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      }
    }
  }

  // -- small pieces -------------------------------------------------------------------------------

  function notice(text, kind) {
    const box = $("#notice");
    box.textContent = text;
    box.className = "notice " + (kind || "");
    box.hidden = !text;
  }

  function currentKg() { return $("#kg").value || null; }
  function currentStrategy() { return $("#strategy").value || null; }

  function clip(text, n) {
    const s = String(text);
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  function copyText(text, button) {
    const done = () => {
      const old = button.textContent;
      button.textContent = "Copied";
      setTimeout(() => { button.textContent = old; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
    } else {
      fallbackCopy(text, done);
    }
  }

  function fallbackCopy(text, done) {
    const area = el("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } finally { area.remove(); }
    done();
  }

  // -- results ------------------------------------------------------------------------------------

  /** Only web addresses become links: an IRI such as `javascript:…` from a hostile graph stays text. */
  function isWebIri(iri) {
    return /^https?:\/\//i.test(iri);
  }

  /** A long IRI no prefix compacts, shortened to its host and last part (the whole IRI is its tooltip). */
  function shortIri(iri) {
    if (iri.length <= 48) return "<" + iri + ">";
    const m = /^([a-z][\w+.-]*:\/*)?([^/?#]*)(.*?)([^/?#]+[/#]?)$/i.exec(iri);
    if (!m || !m[4]) return "<" + iri.slice(0, 24) + "…" + iri.slice(-20) + ">";
    return "<" + m[2] + "/…/" + m[4] + ">";
  }

  function compactOf(iri, compact) {
    const c = compact[iri];
    return c && !c.startsWith("<") ? c : shortIri(iri);
  }

  /** A cell for one SPARQL JSON term: IRIs open their entity panel and show their label. */
  function termNode(term, display) {
    if (!term) return el("span", "unbound", "");
    const labels = (display && display.labels) || {};
    const compact = (display && display.compact) || {};
    if (term.type === "uri") {
      const a = el(isWebIri(term.value) ? "a" : "span", "iri");
      if (isWebIri(term.value)) a.href = term.value;
      a.dataset.iri = term.value;
      a.title = term.value;
      const label = labels[term.value];
      const short = compactOf(term.value, compact);
      if (label && short.startsWith("<")) {
        // No prefix shortens it (a database's row, <…/authors/id=2>): its name is what a person reads.
        a.appendChild(el("span", "label", label));
      } else if (label) {
        a.appendChild(el("span", "label", label));
        a.appendChild(el("span", "qname", short));
      } else {
        a.appendChild(el("span", "qname only", compactOf(term.value, compact)));
      }
      a.addEventListener("click", (ev) => {
        if (ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return; // let the browser open it
        ev.preventDefault();
        showEntity(term.value);
      });
      return a;
    }
    if (term.type === "bnode") return el("span", "bnode", "_:" + term.value);
    const span = el("span", "literal", term.value);
    span.title = term.value;  // cells do not wrap: a long value is cut, and whole on hover
    if (term["xml:lang"]) span.appendChild(el("span", "lang", "@" + term["xml:lang"]));
    else if (term.datatype && !term.datatype.startsWith(XSD)) {
      span.appendChild(el("span", "dtype", "^^" + (compact[term.datatype] || term.datatype)));
    }
    return span;
  }

  /** A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180); a value a spreadsheet would
   * run as a formula (a leading =, +, -, @, tab or CR, numbers aside) gets a ' before it, as the CLI's CSV does. */
  function csvField(text) {
    let s = String(text);
    if (/^[=+\-@\t\r]/.test(s) && !/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) s = "'" + s;
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  /** The results as CSV the way SPARQL 1.1 writes them: a header of variable names, then each term's value. */
  function resultsCsv(results) {
    if ("boolean" in results) return "boolean\r\n" + results.boolean + "\r\n";
    const vars = (results.head && results.head.vars) || [];
    const rows = (results.results && results.results.bindings) || [];
    const lines = [vars.map(csvField).join(",")];
    for (const row of rows) lines.push(vars.map((v) => csvField(row[v] ? row[v].value : "")).join(","));
    return lines.join("\r\n") + "\r\n";
  }

  function download(name, type, text) {
    const url = URL.createObjectURL(new Blob([text], { type: type }));
    const a = el("a");
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  function downloadButtons(results) {
    const box = el("span", "downloads");
    const csv = el("button", "linkish download-csv", "CSV");
    csv.type = "button";
    csv.title = "Download the results as CSV";
    csv.addEventListener("click", () => download("results.csv", "text/csv", resultsCsv(results)));
    const json = el("button", "linkish download-json", "JSON");
    json.type = "button";
    json.title = "Download the results as SPARQL 1.1 JSON";
    json.addEventListener("click", () => {
      const plain = Object.assign({}, results);
      delete plain.sparqlnav;
      download("results.json", "application/sparql-results+json", JSON.stringify(plain, null, 2));
    });
    box.append(" · download ", csv, json);
    return box;
  }

  /** Render SPARQL JSON results (with display labels) into `target`. */
  function renderResults(target, results, display, note, language) {
    const sql = language === "SQL";  // SQL's columns are columns, not variables: no '?'; a NULL is shown as such
    target.textContent = "";
    if (!results) return;
    if ("boolean" in results) {
      target.appendChild(el("div", "boolean", results.boolean ? "true" : "false"));
      const row = el("div", "summary", "");
      row.appendChild(downloadButtons(results));
      target.appendChild(row);
      return;
    }
    const vars = (results.head && results.head.vars) || [];
    const rows = (results.results && results.results.bindings) || [];
    const summary = el("div", "summary", rows.length + (rows.length === 1 ? " row" : " rows") + (note ? " · " + note : ""));
    if (results.sparqlnav && results.sparqlnav.truncated) {
      summary.appendChild(el("span", "warn", " · cut at " + (results.sparqlnav.cap || "a cap") + ": more rows exist"));
    }
    if (rows.length) summary.appendChild(downloadButtons(results));
    target.appendChild(summary);
    if (!rows.length) return;
    const scroller = el("div", "table-scroll");
    const table = el("table", "results-table");
    const thead = el("thead");
    const hr = el("tr");
    for (const v of vars) hr.appendChild(el("th", null, (sql ? "" : "?") + v));
    thead.appendChild(hr);
    table.appendChild(thead);
    const tbody = el("tbody");
    const limit = 1000;
    rows.slice(0, limit).forEach((row) => {
      const tr = el("tr");
      for (const v of vars) {
        const td = el("td");
        td.dataset.value = row[v] ? row[v].value : "";
        td.appendChild(sql && !row[v] ? el("span", "null", "NULL") : termNode(row[v], display));
        tr.appendChild(td);
      }
      tbody.appendChild(tr);
    });
    table.appendChild(tbody);
    scroller.appendChild(table);
    target.appendChild(scroller);
    if (rows.length > limit) target.appendChild(el("div", "summary", "showing the first " + limit + " rows"));
  }

  async function runQuery(query, resultsTarget, statusTarget, editor) {
    statusTarget.textContent = "running…";
    statusTarget.className = "status running";
    if (editor) editor.clearError();
    try {
      const data = await postJSON("/api/sparql", { query: query, kg: currentKg() });
      statusTarget.textContent = data.outcome + " · " + data.seconds.toFixed(3) + " s";
      statusTarget.className = "status ok";
      renderResults(resultsTarget, data.results, data.display);
    } catch (err) {
      const syntax = err.body && err.body.syntax;
      // Our parser's line, column and words, not the engine's list of expected characters.
      statusTarget.textContent = syntax ? err.body.outcome + ": " + syntax.text : err.message;
      statusTarget.className = "status error";
      if (syntax && editor) editor.markError(syntax);
    }
  }

  /** Copy a query with PREFIX lines for the prefixes it uses (the server knows the KG's), so it runs elsewhere. */
  async function copyQuery(query, button) {
    let text = query;
    try {
      text = (await postJSON("/api/sparql/check", { query: query, kg: currentKg() })).query;
    } catch (_) { /* copy it as it is */ }
    copyText(text, button);
  }

  // -- entity panel -------------------------------------------------------------------------------

  async function showEntity(iri) {
    const panel = $("#entity-panel");
    const body = $("#entity-body");
    panel.hidden = false;
    $("#entity-title").textContent = iri;
    body.textContent = "loading…";
    try {
      const kg = currentKg();
      const page = await getJSON("/api/entity?id=" + encodeURIComponent("<" + iri + ">") + (kg ? "&kg=" + encodeURIComponent(kg) : ""));
      const display = { labels: {}, compact: page.compact || {} };
      for (const e of page.edges) {
        if (e.label) display.labels[e.property] = e.label;
        for (const v of e.values) if (v.label) display.labels[v.value.value] = v.label;
      }
      $("#entity-title").textContent = page.label || (page.compact && page.compact[page.iri]) || page.iri;
      body.textContent = "";
      if (isWebIri(page.iri)) {
        const link = el("a", "iri-raw", page.iri);
        link.href = page.iri;
        link.target = "_blank";
        link.rel = "noopener";
        body.appendChild(link);
      } else {
        body.appendChild(el("span", "iri-raw", page.iri));
      }
      if (page.description) body.appendChild(el("p", "desc", page.description));
      const table = el("table", "edges");
      for (const e of page.edges) {
        e.values.forEach((v, i) => {
          const tr = el("tr");
          const th = el("th");
          if (i === 0) th.appendChild(termNode({ type: "uri", value: e.property }, display));
          tr.appendChild(th);
          const td = el("td");
          td.appendChild(termNode(v.value, display));
          for (const q of v.qualifiers || []) {
            const qd = el("div", "qualifier");
            // compact names, as the edges have them: a full qualifier IRI wrapped badly in the 400 px panel
            qd.appendChild(termNode({ type: "uri", value: q.property }, { labels: { [q.property]: q.label }, compact: display.compact }));
            qd.appendChild(document.createTextNode(": "));
            qd.appendChild(termNode(q.value, { labels: q.value_label ? { [q.value.value]: q.value_label } : {}, compact: display.compact }));
            td.appendChild(qd);
          }
          tr.appendChild(td);
          table.appendChild(tr);
        });
      }
      if (!page.edges.length) body.appendChild(el("p", "muted", "no outgoing edges"));
      body.appendChild(table);
    } catch (err) {
      body.textContent = err.message;
    }
  }

  // -- the chat -----------------------------------------------------------------------------------

  const EVENT_TITLES = {
    thought: "thought", action: "action", observation: "observation", sparql: "query", sql: "SQL", feedback: "feedback",
    rollback: "rollback", llm_call: "LLM", info: "note", error: "error",
  };

  /** One line (and an expandable body) for a trace event. */
  function eventNode(ev) {
    const d = ev.data || {};
    const li = el("li", "event ev-" + ev.kind);
    li.dataset.kind = ev.kind;
    li.appendChild(el("span", "ev-kind", EVENT_TITLES[ev.kind] || ev.kind));
    const body = el("div", "ev-body");
    if (ev.kind === "thought") {
      body.textContent = d.text || "";
    } else if (ev.kind === "action") {
      body.appendChild(el("code", "tool", d.tool || d.name || "?"));
      body.appendChild(el("code", "args", "(" + clip(JSON.stringify(d.arguments || d.args || {}), 400) + ")"));
    } else if (ev.kind === "observation") {
      const text = String(d.text || "");
      const pre = el("pre", "obs", clip(text, 900));
      body.appendChild(pre);
      if (text.length > 900) {
        const more = el("button", "linkish more", "show all");
        more.type = "button";
        more.addEventListener("click", () => { pre.textContent = text; more.remove(); });
        body.appendChild(more);
      }
    } else if (ev.kind === "sparql") {
      const head = el("div", "sparql-head");
      head.appendChild(el("span", "outcome outcome-" + d.outcome, d.outcome));
      if (d.rows !== null && d.rows !== undefined) head.appendChild(el("span", "muted", " " + d.rows + (d.rows === 1 ? " row" : " rows")));
      if (d.seconds !== undefined) head.appendChild(el("span", "muted", " · " + d.seconds + " s"));
      if (d.message) head.appendChild(el("span", "muted", " · " + clip(d.message, 200)));
      body.appendChild(head);
      const details = el("details", "q");
      details.appendChild(el("summary", null, clip(String(d.query || "").replace(/\s+/g, " "), 140)));
      const code = el("pre", "sparql-code");
      SparqlHighlight.highlightInto(code, String(d.query || ""));
      details.appendChild(code);
      body.appendChild(details);
    } else if (ev.kind === "sql") {
      // A SQL statement the build strategy ran on the database (its SQL target): outcome, rows, time, the text.
      const head = el("div", "sparql-head");
      head.appendChild(el("span", "outcome outcome-" + (d.ok ? "ok" : "error"), d.ok ? "ok" : "error"));
      if (d.rows !== null && d.rows !== undefined) head.appendChild(el("span", "muted", " " + d.rows + (d.rows === 1 ? " row" : " rows")));
      if (d.ms !== undefined) head.appendChild(el("span", "muted", " · " + d.ms + " ms"));
      if (d.error) head.appendChild(el("span", "muted", " · " + clip(d.error, 200)));
      body.appendChild(head);
      const details = el("details", "q");
      details.appendChild(el("summary", null, clip(String(d.query || "").replace(/\s+/g, " "), 140)));
      details.appendChild(el("pre", "sparql-code", String(d.query || "")));
      body.appendChild(details);
    } else if (ev.kind === "llm_call") {
      body.textContent = (d.input_tokens || 0) + " in / " + (d.output_tokens || 0) + " out tokens" +
        (d.latency_s !== undefined ? " · " + d.latency_s + " s" : "") + (d.model ? " · " + d.model : "");
    } else if (ev.kind === "context" && d.summary) {
      body.textContent = String(d.summary); // the prompt block (d.text) is for models; people get one line
    } else {
      const text = d.text || d.message || d.guideline || d.reason || "";
      body.textContent = text ? String(text) : clip(JSON.stringify(d), 600);
    }
    li.appendChild(body);
    li.appendChild(el("span", "ev-time", ev.t !== undefined ? ev.t.toFixed(2) + " s" : ""));
    return li;
  }

  // A query as it is compared with the queries the steps ran: its prefixed names written out as <IRI>s, its
  // PREFIX lines dropped, spaces squashed (strategies may run full IRIs and show the query with prefixes).
  function squash(q) {
    const prefixes = {};
    const body = String(q || "").replace(/^\s*PREFIX\s+([^\s:]*):\s*<([^>]*)>/gim, (_, p, ns) => {
      prefixes[p] = ns;
      return "";
    });
    const full = body.replace(/(^|[\s{}();,\/^|])([A-Za-z][\w.-]*)?:([\w-]*(?:\.[\w-]+)*)/g, (m, lead, p, local) =>
      (p || "") in prefixes ? lead + "<" + prefixes[p || ""] + local + ">" : m);
    return full.replace(/\s+/g, " ").trim();
  }

  /** What the steps of a finished run come to, in one line: what was linked, how many queries ran, and which
      of them gave the answer (its number among the queries, as the steps show them; the server says which). */
  function stepsSummary(events, answer) {
    const linked = [];
    const queries = events.filter((e) => e.kind === "sparql");
    const statements = events.filter((e) => e.kind === "sql");  // a database answered in SQL runs no SPARQL
    // With an answering query, a linked entity is named only when that query uses it ("Who discovered oxygen?"
    // linked group 16 too, a candidate no answer used).
    const used = answer && answer.sparql ? squash(answer.sparql) : "";
    for (const e of events) {
      const d = e.data || {};
      if (e.kind === "action" && ["search", "get_entity"].includes(d.tool || d.name)) {
        const args = d.arguments || d.args || {};
        const what = args.query || args.id;
        if (what) linked.push(String(what));
      } else if (e.kind === "info" && d.linking && Array.isArray(d.linking.entities)) {
        const ents = d.linking.entities;
        const inAnswer = used ? ents.filter((ent) => ent.iri && used.includes("<" + ent.iri + ">")) : [];
        for (const ent of (inAnswer.length ? inAnswer : used ? [] : ents).slice(0, 3)) {
          linked.push(ent.label || ent.iri || "?");
        }
      }
    }
    const parts = [];
    const names = Array.from(new Set(linked));
    if (names.length) parts.push("linked " + names.slice(0, 4).join(", ") + (names.length > 4 ? " …" : ""));
    if (queries.length || !statements.length) parts.push(queries.length + (queries.length === 1 ? " query" : " queries"));
    if (statements.length) parts.push(statements.length + (statements.length === 1 ? " SQL query" : " SQL queries"));
    // Which query gave the answer is the server's to say (faces/steps.py, the answer's `steps`), as the CLI says it.
    const by = answer && answer.steps && answer.steps.answered_by;
    const from = by && by.language === "SPARQL" ? by.number : 0;
    const fromSql = by && by.language === "SQL" ? by.number : 0;
    if (fromSql) parts.push("answer from SQL query #" + fromSql);
    else if (from) parts.push("answer from query #" + from);
    else if (answer && (answer.sparql || answer.sql)) parts.push("answer from a query not run in these steps");
    else parts.push("no query gave the answer");
    return { text: parts.join(" · "), from: from, fromSql: fromSql };
  }

  /** Fold the finished run's steps into their summary line; they open again on a click. */
  function collapseSteps(turn, events, answer) {
    const steps = turn.querySelector(".steps");
    const { text, from, fromSql } = stepsSummary(events, answer);
    const line = steps.querySelector(".steps-summary");
    line.textContent = text;
    line.hidden = false;
    steps.dataset.answerQuery = String(from);
    const numbered = steps.querySelectorAll(".event[data-kind=sparql]");
    numbered.forEach((li, i) => {
      li.dataset.query = String(i + 1);
      li.querySelector(".ev-kind").textContent = "query #" + (i + 1);
      if (i + 1 === from) li.classList.add("gave-answer");
    });
    steps.querySelectorAll(".event[data-kind=sql]").forEach((li, i) => {
      li.dataset.sql = String(i + 1);
      li.querySelector(".ev-kind").textContent = "SQL #" + (i + 1);
      if (i + 1 === fromSql) li.classList.add("gave-answer");
    });
    steps.open = false;
  }

  function renderAnswer(turn, answer) {
    const box = turn.querySelector(".answer");
    box.textContent = "";
    const status = answer.status || "answered";
    // With the query shown below, the words need not repeat it ("Probably: …" without the query's text).
    const words = (answer.sparql || answer.sql) && answer.extra && answer.extra.text_beside_query;
    box.appendChild(el("div", "answer-text status-" + status, words || answer.answer || "(no answer)"));
    if (answer.error) box.appendChild(el("div", "error-text", answer.error));

    const display = (answer.extra && answer.extra.display) || {};
    const resultsBox = el("div", "results");
    if (answer.sparql) {
      const block = el("div", "sparql-block");
      block.appendChild(el("div", "block-title", "SPARQL"));
      const statusLine = el("span", "status");
      const runEdited = (q) => {
        if (q.trim() !== answer.sparql.trim()) setEdit(q);
        return runQuery(q, resultsBox, statusLine, editor);
      };
      const editor = SparqlHighlight.createEditor(answer.sparql, {
        label: "Final SPARQL query",
        onRun: runEdited,
      });
      block.appendChild(editor.element);
      const row = el("div", "row");
      const copy = el("button", "copy", "Copy");
      copy.type = "button";
      copy.title = "Copy the query with its PREFIX lines";
      copy.addEventListener("click", () => copyQuery(editor.get(), copy));
      const run = el("button", "run", "Run");
      run.type = "button";
      run.addEventListener("click", () => runEdited(editor.get()));
      const reset = el("button", "linkish reset", "reset");
      reset.type = "button";
      reset.addEventListener("click", () => {
        editor.set(answer.sparql);
        renderResults(resultsBox, answer.results, display);
        statusLine.className = "status";
        statusLine.textContent = "";
      });
      row.append(copy, run, reset, statusLine);
      block.appendChild(row);
      box.appendChild(block);
    } else if (answer.sql) {
      // The SQL builder's final statement: shown and copied; it runs on the database, not the graph's editor.
      const block = el("div", "sparql-block");
      block.appendChild(el("div", "block-title", "SQL"));
      block.appendChild(el("pre", "sparql-code sql-code", answer.sql));
      const row = el("div", "row");
      const copy = el("button", "copy", "Copy");
      copy.type = "button";
      copy.title = "Copy the SQL statement";
      copy.addEventListener("click", () => copyText(answer.sql, copy));
      row.append(copy);
      block.appendChild(row);
      box.appendChild(block);
    }
    box.appendChild(resultsBox);
    renderResults(resultsBox, answer.results, display, undefined, answer.sql ? "SQL" : "SPARQL");
    renderEvidence(box, answer.extra || {});

    const u = answer.usage || {};
    const bits = [answer.strategy, status];
    if (u.sparql_queries || !u.sql_queries) bits.push((u.sparql_queries || 0) + " queries");
    if (u.sql_queries) bits.push(u.sql_queries + " SQL queries");  // both, when a cascade ran both
    if (u.llm_calls) bits.push(u.llm_calls + " LLM calls (" + (u.input_tokens || 0) + "+" + (u.output_tokens || 0) + " tokens)");
    if (u.cost_usd) bits.push("$" + u.cost_usd.toFixed(4));
    bits.push((u.seconds || 0).toFixed(2) + " s");
    const foot = el("div", "turn-foot");
    foot.appendChild(el("div", "usage", bits.join(" · ")));
    if (answer.turn) {
      turn.dataset.turn = String(answer.turn);
      turn.querySelector(".turn-number").textContent = "#" + answer.turn;
      const refine = el("button", "linkish refine", "Refine");
      refine.type = "button";
      refine.title = "Ask a follow-up that starts from this answer";
      refine.addEventListener("click", () => setRefine(answer.turn, turn));
      foot.appendChild(refine);
    }
    box.appendChild(foot);
  }

  // -- the conversation ----------------------------------------------------------------------------

  function showThread() {
    const refineChip = $("#refine-chip");
    refineChip.hidden = state.refine === null;
    if (state.refine !== null) $("#refine-text").textContent = "Refining turn #" + state.refine;
    $("#edit-chip").hidden = state.edit === null;
    document.querySelectorAll(".turn.refining").forEach((t) => {
      if (t.dataset.turn !== String(state.refine)) t.classList.remove("refining");
    });
  }

  function setRefine(number, turn) {
    state.refine = number;
    if (turn) turn.classList.add("refining");
    showThread();
    $("#question").focus();
  }

  function setEdit(query) {
    state.edit = query;
    showThread();
  }

  // -- the start page: example questions for the selected KG ------------------------------------------

  async function loadExamples() {
    const kg = currentKg();
    state.examples = { kg: kg, questions: [] };
    try {
      const found = await getJSON("/api/examples" + (kg ? "?kg=" + encodeURIComponent(kg) : ""));
      if (currentKg() !== kg) return;  // another KG was chosen meanwhile
      state.examples = { kg: kg, questions: found.questions || [], source: found.source };
    } catch (_) { /* no examples: the start page says the rest */ }
    showExamples();
  }

  function showExamples() {
    const box = document.querySelector("#welcome .examples");
    if (!box) return;
    const list = box.querySelector(".example-list");
    list.textContent = "";
    const questions = (state.examples && state.examples.questions) || [];
    for (const q of questions) {
      const b = el("button", "example", q);
      b.type = "button";
      b.title = "Ask this";
      list.appendChild(b);
    }
    box.hidden = !questions.length;
    box.dataset.source = (state.examples && state.examples.source) || "";
  }

  function newConversation() {
    state.conversation = null;
    state.refine = null;
    state.edit = null;
    const chat = $("#chat");
    chat.textContent = "";
    if (state.welcome) chat.appendChild(state.welcome.cloneNode(true));
    showExamples();
    showThread();
    $("#question").focus();
  }

  // The hybrid strategy's sources, under the answer: each opens to the text it was taken from. A citation
  // [E2] in the answer text jumps to its source.
  function renderEvidence(box, extra) {
    const items = extra.evidence || [];
    const failed = extra.failed || {};
    if (!items.length && !Object.keys(failed).length) return;
    const list = el("div", "evidence");
    list.appendChild(el("div", "block-title", "Sources"));
    for (const item of items) {
      const entry = el("details", "evidence-item" + (item.used ? " used" : ""));
      entry.dataset.evidence = item.id;
      const summary = el("summary", "", "[" + item.id + "] " + item.kind + " · " + item.ref + (item.used ? "" : " (not cited)"));
      entry.appendChild(summary);
      entry.appendChild(el("div", "evidence-text", item.text));
      if (item.source && item.source !== item.text) entry.appendChild(el("pre", "evidence-source", item.source));
      list.appendChild(entry);
    }
    for (const [branch, why] of Object.entries(failed)) {
      list.appendChild(el("div", "error-text", "source " + branch + " failed: " + why));
    }
    box.appendChild(list);
    const text = box.querySelector(".answer-text");
    if (text) linkCitations(text, list);
  }

  // Turns each [E2] of the answer text into a button that opens that source.
  function linkCitations(text, list) {
    const parts = text.textContent.split(/(\[E\d+\])/);
    if (parts.length < 2) return;
    text.textContent = "";
    for (const part of parts) {
      const cite = /^\[(E\d+)\]$/.exec(part);
      if (!cite) { text.appendChild(document.createTextNode(part)); continue; }
      const button = el("button", "linkish cite", part);
      button.type = "button";
      button.addEventListener("click", () => {
        const target = list.querySelector('[data-evidence="' + cite[1] + '"]');
        if (target) { target.open = true; target.scrollIntoView({ block: "nearest" }); }
      });
      text.appendChild(button);
    }
  }

  function newTurn(question) {
    const welcome = $("#welcome");
    if (welcome) welcome.remove();
    const turn = el("article", "turn");
    const head = el("div", "question-row");
    head.appendChild(el("span", "turn-number", ""));
    if (state.refine !== null) head.appendChild(el("span", "turn-note refines", "refines #" + state.refine));
    if (state.edit !== null) head.appendChild(el("span", "turn-note edited", "builds on your edited query"));
    head.appendChild(el("div", "question", question));
    turn.appendChild(head);
    const steps = el("details", "steps");
    steps.open = true;
    const summary = el("summary");
    summary.appendChild(el("span", "steps-title", "Steps"));
    summary.appendChild(el("span", "steps-count", "0"));
    summary.appendChild(el("span", "spinner", ""));
    const line = el("span", "steps-summary", "");
    line.hidden = true;
    summary.appendChild(line);
    steps.appendChild(summary);
    steps.appendChild(el("ol", "events"));
    turn.appendChild(steps);
    turn.appendChild(el("div", "answer pending", "working…"));
    $("#chat").appendChild(turn);
    return turn;
  }

  async function ask(question) {
    if (state.busy) return;
    state.busy = true;
    $("#ask-button").disabled = true;
    notice("");
    const turn = newTurn(question);
    const list = turn.querySelector(".events");
    const count = turn.querySelector(".steps-count");
    const seen = [];
    let n = 0;
    const body = { question: question, kg: currentKg(), strategy: currentStrategy() };
    if (state.conversation) body.conversation = state.conversation;
    if (state.refine !== null) body.refine = state.refine;
    if (state.edit !== null) body.sparql = state.edit;
    state.refine = null;
    state.edit = null;
    showThread();
    try {
      await postStream("/api/ask/stream", body, (name, data) => {
        if (name === "trace") {
          if (data.kind === "answer") return;
          list.appendChild(eventNode(data));
          seen.push(data);
          n += 1;
          count.textContent = String(n);
          list.lastChild.scrollIntoView({ block: "nearest" });
        } else if (name === "answer") {
          if (data.conversation) state.conversation = data.conversation;
          turn.querySelector(".answer").classList.remove("pending");
          renderAnswer(turn, data);
          collapseSteps(turn, seen, data);  // the answer first; the steps stay one click away
          turn.classList.add("done");
        } else if (name === "error") {
          throw new Error(data.detail || "the run failed");
        }
      });
      if (!turn.classList.contains("done")) throw new Error("the stream ended without an answer");
    } catch (err) {
      const box = turn.querySelector(".answer");
      box.classList.remove("pending");
      box.textContent = "";
      box.appendChild(el("div", "error-text", err.message));
      turn.classList.add("failed");
    } finally {
      turn.querySelector(".steps").classList.add("finished");
      state.busy = false;
      $("#ask-button").disabled = false;
      turn.scrollIntoView({ block: "end" });
    }
  }

  // -- setup --------------------------------------------------------------------------------------

  function setMode(mode) {
    const ask = mode === "ask";
    $("#ask-view").hidden = !ask;
    $("#sparql-view").hidden = ask;
    $("#strategy-picker").hidden = !ask;
    $("#mode-ask").classList.toggle("active", ask);
    $("#mode-sparql").classList.toggle("active", !ask);
    $("#mode-ask").setAttribute("aria-selected", String(ask));
    $("#mode-sparql").setAttribute("aria-selected", String(!ask));
    (ask ? $("#question") : sparqlEditor.textarea).focus();
  }

  let sparqlEditor = null;

  async function init() {
    const resultsBox = $("#sparql-results");
    const statusLine = $("#sparql-status");
    sparqlEditor = SparqlHighlight.createEditor("SELECT ?s ?p ?o WHERE {\n  ?s ?p ?o .\n}\nLIMIT 10", {
      label: "SPARQL editor",
      minRows: 8,
      onRun: (q) => runQuery(q, resultsBox, statusLine, sparqlEditor),
    });
    $("#sparql-editor-slot").appendChild(sparqlEditor.element);
    $("#sparql-run").addEventListener("click", () => runQuery(sparqlEditor.get(), resultsBox, statusLine, sparqlEditor));
    $("#mode-ask").addEventListener("click", () => setMode("ask"));
    $("#mode-sparql").addEventListener("click", () => setMode("sparql"));
    $("#entity-close").addEventListener("click", () => { $("#entity-panel").hidden = true; });
    state.welcome = $("#welcome").cloneNode(true);
    $("#new-conversation").addEventListener("click", newConversation);
    $("#refine-cancel").addEventListener("click", () => { state.refine = null; showThread(); });
    $("#edit-cancel").addEventListener("click", () => { state.edit = null; showThread(); });
    $("#kg").addEventListener("change", () => {
      if (state.conversation) newConversation();
      loadExamples();
    });
    // One click asks an example (delegated: the start page is rebuilt for each new conversation).
    $("#chat").addEventListener("click", (ev) => {
      const b = ev.target.closest("button.example");
      if (b && !state.busy) ask(b.textContent);
    });
    $("#menu-toggle").addEventListener("click", () => {
      const open = !$(".top").classList.contains("open");
      $(".top").classList.toggle("open", open);
      $("#menu-toggle").setAttribute("aria-expanded", String(open));
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && !$("#entity-panel").hidden) $("#entity-panel").hidden = true;
    });
    $("#ask-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const q = $("#question").value.trim();
      if (!q) return;
      $("#question").value = "";
      ask(q);
    });
    $("#question").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey) {
        ev.preventDefault();
        $("#ask-form").requestSubmit();
      }
    });
    $("#token-button").addEventListener("click", () => {
      $("#token-input").value = localStorage.getItem("sparqlnav-token") || "";
      $("#token-dialog").showModal();
    });
    $("#token-dialog").addEventListener("close", () => {
      if ($("#token-dialog").returnValue === "save") {
        const t = $("#token-input").value.trim();
        if (t) localStorage.setItem("sparqlnav-token", t); else localStorage.removeItem("sparqlnav-token");
        loadInfo();
      }
    });
    await loadInfo();
  }

  async function loadInfo() {
    try {
      const info = await getJSON("/api/info");
      state.info = info;
      const kg = $("#kg");
      kg.textContent = "";
      for (const k of info.kgs) {
        const opt = el("option", null, k.name);
        opt.value = k.name;
        if (k.description) opt.title = k.description;
        kg.appendChild(opt);
      }
      kg.value = info.default_kg;
      const strat = $("#strategy");
      strat.textContent = "";
      for (const s of info.strategies) {
        const opt = el("option", null, s);
        opt.value = s;
        strat.appendChild(opt);
      }
      strat.value = info.strategies.includes(info.default_strategy) ? info.default_strategy : "auto";
      if (!info.llm) strat.title = "No LLM is configured: auto uses the lexical strategy";
      await loadExamples();
      document.body.dataset.ready = "true";
    } catch (err) {
      notice("Cannot reach the server: " + err.message, "error");
    }
  }

  document.addEventListener("DOMContentLoaded", init);
})();
