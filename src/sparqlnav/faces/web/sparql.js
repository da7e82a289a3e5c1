/* SPARQL syntax highlighting and a small highlighted editor (a textarea over a highlighted copy).
   Plain browser JavaScript with no dependencies, so the UI works offline. */
(function (global) {
  "use strict";

  const KEYWORDS = new Set((
    "BASE PREFIX SELECT CONSTRUCT DESCRIBE ASK DISTINCT REDUCED FROM NAMED WHERE ORDER BY ASC DESC LIMIT OFFSET " +
    "VALUES OPTIONAL GRAPH SERVICE SILENT BIND UNION MINUS FILTER EXISTS NOT IN AS GROUP HAVING UNDEF " +
    "COUNT SUM MIN MAX AVG SAMPLE GROUP_CONCAT SEPARATOR STR LANG LANGMATCHES DATATYPE BOUND IRI URI BNODE " +
    "RAND ABS CEIL FLOOR ROUND CONCAT STRLEN UCASE LCASE ENCODE_FOR_URI CONTAINS STRSTARTS STRENDS " +
    "STRBEFORE STRAFTER YEAR MONTH DAY HOURS MINUTES SECONDS TIMEZONE TZ NOW UUID STRUUID MD5 SHA1 SHA256 " +
    "SHA384 SHA512 COALESCE IF STRLANG STRDT SAMETERM ISIRI ISURI ISBLANK ISLITERAL ISNUMERIC REGEX SUBSTR " +
    "REPLACE TRUE FALSE"
  ).split(" "));

  // Order matters: the first pattern that matches at the current position wins.
  const RULES = [
    ["comment", /#[^\n]*/y],
    ["string", /"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?/y],
    ["iri", /<[^<>"{}|^`\\\s]*>/y],
    ["var", /[?$][A-Za-z0-9_\u00B7\u00C0-\uFFFF]+/y],
    ["langtag", /@[A-Za-z]+(?:-[A-Za-z0-9]+)*/y],
    ["pname", /(?:[A-Za-z\u00C0-\uFFFF][\w.\-\u00B7\u00C0-\uFFFF]*)?:(?:[\w\u00C0-\uFFFF%:\-]|\.(?=[\w%:]))*/y],
    ["number", /[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)/y],
    ["word", /[A-Za-z_][A-Za-z0-9_]*/y],
    ["punct", /\^\^|&&|\|\||!=|<=|>=|[{}()\[\].,;*\/+\-=<>!|^]/y],
    ["space", /\s+/y],
  ];

  /** Split SPARQL text into [kind, text] tokens; concatenated they give the text back exactly. */
  function tokenize(text) {
    const out = [];
    let pos = 0;
    while (pos < text.length) {
      let matched = false;
      for (const [kind, re] of RULES) {
        re.lastIndex = pos;
        const m = re.exec(text);
        if (m && m[0].length > 0) {
          let k = kind;
          if (kind === "word") {
            const up = m[0].toUpperCase();
            k = KEYWORDS.has(up) ? "keyword" : (m[0] === "a" ? "keyword" : "plain");
          }
          out.push([k, m[0]]);
          pos += m[0].length;
          matched = true;
          break;
        }
      }
      if (!matched) {
        out.push(["plain", text[pos]]);
        pos += 1;
      }
    }
    return out;
  }

  /** Fill `target` with highlighted spans for `text` (DOM nodes only: no HTML parsing of the query). */
  function highlightInto(target, text) {
    target.textContent = "";
    for (const [kind, tok] of tokenize(text)) {
      if (kind === "plain" || kind === "space") {
        target.appendChild(document.createTextNode(tok));
      } else {
        const span = document.createElement("span");
        span.className = "tok-" + kind;
        span.textContent = tok;
        target.appendChild(span);
      }
    }
    // A trailing newline needs a character after it to take up a line in the <pre>.
    target.appendChild(document.createTextNode("\n"));
  }

  /** A highlighted, editable SPARQL editor; returns {element, textarea, get, set, focus}. */
  function createEditor(initial, options) {
    const opts = options || {};
    const wrap = document.createElement("div");
    wrap.className = "editor";
    const pre = document.createElement("pre");
    pre.className = "editor-hl";
    pre.setAttribute("aria-hidden", "true");
    const code = document.createElement("code");
    pre.appendChild(code);
    const area = document.createElement("textarea");
    area.className = "editor-src";
    area.spellcheck = false;
    area.setAttribute("autocapitalize", "off");
    area.setAttribute("autocomplete", "off");
    area.setAttribute("aria-label", opts.label || "SPARQL query");
    area.wrap = "off";
    wrap.appendChild(pre);
    wrap.appendChild(area);

    function refresh() {
      highlightInto(code, area.value);
      const lines = area.value.split("\n").length;
      area.rows = Math.max(opts.minRows || 3, Math.min(lines, opts.maxRows || 30));
      pre.scrollTop = area.scrollTop;
      pre.scrollLeft = area.scrollLeft;
    }
    area.addEventListener("input", refresh);
    area.addEventListener("scroll", () => {
      pre.scrollTop = area.scrollTop;
      pre.scrollLeft = area.scrollLeft;
    });
    area.addEventListener("keydown", (ev) => {
      if (ev.key === "Tab" && !ev.shiftKey && !ev.ctrlKey && !ev.metaKey) {
        ev.preventDefault();
        const s = area.selectionStart, e = area.selectionEnd;
        area.setRangeText("  ", s, e, "end");
        refresh();
      } else if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && opts.onRun) {
        ev.preventDefault();
        opts.onRun(area.value);
      }
    });
    area.value = initial || "";
    refresh();
    return {
      element: wrap,
      textarea: area,
      get: () => area.value,
      set: (text) => { area.value = text; refresh(); },
      focus: () => area.focus(),
    };
  }

  global.SparqlHighlight = { tokenize, highlightInto, createEditor };
})(window);
