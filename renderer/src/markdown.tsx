// Model output as markdown, sanitised: the model's text never becomes live HTML.
import DOMPurify from "dompurify";
import { marked } from "marked";
import { useMemo } from "react";

marked.setOptions({ gfm: true, breaks: true });

export function Markdown({ text, testId }: { text: string; testId?: string }) {
  const html = useMemo(() => DOMPurify.sanitize(marked.parse(text, { async: false }), { USE_PROFILES: { html: true } }), [text]);
  return <div className="markdown" data-testid={testId} dangerouslySetInnerHTML={{ __html: html }} />;
}
