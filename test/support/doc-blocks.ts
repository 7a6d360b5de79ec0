// The code blocks of a markdown document, by the section they are in: tests run docs' snippets as printed.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./svc-process.js";

export interface DocBlock {
  section: string;
  lang: string;
  code: string;
}

export function docBlocks(file: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  let section = "";
  let open: DocBlock | null = null;
  for (const line of readFileSync(join(ROOT, file), "utf8").split("\n")) {
    if (open) {
      if (line.startsWith("```")) {
        blocks.push(open);
        open = null;
      } else open.code += `${line}\n`;
      continue;
    }
    const heading = /^##\s+(.*)$/.exec(line);
    if (heading) section = heading[1]!.trim();
    const fence = /^```(\w*)/.exec(line);
    if (fence) open = { section, lang: fence[1] ?? "", code: "" };
  }
  return blocks;
}

/** The one block of `lang` in `section`. */
export function docBlock(file: string, section: string, lang: string): string {
  const found = docBlocks(file).filter((b) => b.section === section && b.lang === lang);
  if (found.length !== 1) throw new Error(`${file}: expected one ${lang} block under "## ${section}", found ${found.length}`);
  return found[0]!.code;
}

/** The docs' server address, replaced by the test server's. */
export function atServer(code: string, url: string): string {
  return code.replaceAll("http://127.0.0.1:8787", url);
}
