// Model output as markdown, sanitised: the model's text never becomes live HTML. Code blocks get a language
// label, highlighting (highlight.js, a few common languages) and a copy button.
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { Marked } from "marked";
import { useMemo, type MouseEvent } from "react";
import { copyText } from "./format";

for (const [name, language] of Object.entries({ bash, c, cpp, css, go, java, javascript, json, markdown, python, rust, sql, typescript, xml, yaml }))
  hljs.registerLanguage(name, language);

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);
}

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }) {
      const language = (lang ?? "").trim().split(/\s+/)[0]!.toLowerCase();
      const known = language !== "" && hljs.getLanguage(language) !== undefined;
      const body = known ? hljs.highlight(text, { language, ignoreIllegals: true }).value : escapeHtml(text);
      const label = language ? escapeHtml(language) : "text";
      return (
        `<div class="code-block"><div class="code-head"><span class="code-lang">${label}</span>` +
        `<button type="button" class="code-copy" data-copy-code="1" aria-label="Copy ${label} code">Copy</button></div>` +
        `<pre><code class="hljs${known ? ` language-${language}` : ""}">${body}</code></pre></div>`
      );
    },
  },
});

export function Markdown({ text, testId }: { text: string; testId?: string }) {
  const html = useMemo(() => DOMPurify.sanitize(marked.parse(text, { async: false }), { USE_PROFILES: { html: true } }), [text]);
  const onClick = (event: MouseEvent<HTMLDivElement>) => {
    const button = (event.target as HTMLElement).closest<HTMLButtonElement>("button[data-copy-code]");
    if (!button) return;
    const code = button.closest(".code-block")?.querySelector("code")?.textContent ?? "";
    void copyText(code).then((ok) => {
      button.textContent = ok ? "Copied" : "Copy failed";
      setTimeout(() => (button.textContent = "Copy"), 1500);
    });
  };
  return <div className="markdown" data-testid={testId} onClick={onClick} dangerouslySetInnerHTML={{ __html: html }} />;
}
