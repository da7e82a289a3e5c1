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

  /** The offset in `text` of a 1-based line and column (clamped to the text). */
  function offsetOf(text, line, column) {
    let pos = 0;
    for (let l = 1; l < line; l++) {
      const next = text.indexOf("\n", pos);
      if (next < 0) return text.length;
      pos = next + 1;
    }
    return Math.min(pos + Math.max(column, 1) - 1, text.length);
  }

  function tokenNode(kind, tok) {
    if (kind === "plain" || kind === "space") return document.createTextNode(tok);
    const span = document.createElement("span");
    span.className = "tok-" + kind;
    span.textContent = tok;
    return span;
  }

  /** Fill `target` with highlighted spans for `text` (DOM nodes only: no HTML parsing of the query); with
      `mark` ({line, column, message}) the character there is wrapped in a `.syntax-mark`. */
  function highlightInto(target, text, mark) {
    target.textContent = "";
    const at = mark ? offsetOf(text, mark.line, mark.column) : -1;
    let pos = 0;
    for (const [kind, tok] of tokenize(text)) {
      const end = pos + tok.length;
      if (at >= pos && at < end) {
        // Split the token around the marked character so the mark covers exactly one character.
        const cut = at - pos;
        if (cut > 0) target.appendChild(tokenNode(kind, tok.slice(0, cut)));
        target.appendChild(markNode(tok[cut] === "\n" ? " " : tok[cut], mark));
        if (tok[cut] === "\n") target.appendChild(document.createTextNode("\n"));
        if (cut + 1 < tok.length) target.appendChild(tokenNode(kind, tok.slice(cut + 1)));
      } else {
        target.appendChild(tokenNode(kind, tok));
      }
      pos = end;
    }
    if (at >= text.length) target.appendChild(markNode(" ", mark)); // the error is at the end of the query
    // A trailing newline needs a character after it to take up a line in the <pre>.
    target.appendChild(document.createTextNode("\n"));
  }

  function markNode(ch, mark) {
    const span = document.createElement("span");
    span.className = "syntax-mark";
    span.textContent = ch;
    span.dataset.line = String(mark.line);
    span.dataset.column = String(mark.column);
    return span;
  }

  /** A highlighted, editable SPARQL editor that wraps long lines and grows with its text; returns
      {element, textarea, get, set, focus, markError, clearError}. */
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
    area.wrap = "soft";  // long lines wrap (the highlighted copy wraps the same way) instead of scrolling sideways
    area.rows = opts.minRows || 3;
    const message = document.createElement("div");
    message.className = "editor-error";
    message.setAttribute("role", "alert");
    message.hidden = true;
    wrap.appendChild(pre);
    wrap.appendChild(area);
    let mark = null;

    function refresh() {
      highlightInto(code, area.value, mark);
      // Grow with the text (wrapped lines included) up to maxRows lines, then scroll.
      // With height "auto" the textarea is `rows` (minRows) lines high, so scrollHeight is at least that.
      const style = getComputedStyle(area);
      const lineHeight = parseFloat(style.lineHeight) || 19.5;
      const most = (opts.maxRows || 30) * lineHeight + parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);
      area.style.height = "auto";
      area.style.height = Math.min(area.scrollHeight, most) + "px";
      pre.scrollTop = area.scrollTop;
      pre.scrollLeft = area.scrollLeft;
    }

    function clearError() {
      if (!mark) return;
      mark = null;
      message.hidden = true;
      message.textContent = "";
      wrap.classList.remove("has-error");
      delete wrap.dataset.errorLine;
      highlightInto(code, area.value, null);
    }

    /** Mark a syntax problem ({line, column, message, text}) in the text and say it under the editor. */
    function markError(problem) {
      mark = problem;
      message.textContent = problem.text || ("line " + problem.line + ", column " + problem.column + ": " + problem.message);
      message.hidden = false;
      wrap.classList.add("has-error");
      wrap.dataset.errorLine = String(problem.line);
      highlightInto(code, area.value, mark);
    }

    area.addEventListener("input", () => { clearError(); refresh(); });
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
    const outer = document.createElement("div");
    outer.className = "editor-box";
    outer.appendChild(wrap);
    outer.appendChild(message);
    refresh();
    // The first layout may come later (an editor built before it is shown): size it then.
    let width = 0;
    if (typeof ResizeObserver === "function") {
      new ResizeObserver((entries) => {
        const now = entries[0].contentRect.width;
        if (now === width) return;  // only a new width re-wraps the text; heights are ours
        width = now;
        requestAnimationFrame(refresh);
      }).observe(wrap);
    }
    return {
      element: outer,
      textarea: area,
      get: () => area.value,
      set: (text) => { clearError(); area.value = text; refresh(); },
      focus: () => area.focus(),
      markError: markError,
      clearError: clearError,
    };
  }

  global.SparqlHighlight = { tokenize, highlightInto, createEditor };
})(window);
