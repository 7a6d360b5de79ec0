// Search over the extracted text of the caller's files: each file is cut into passages (paragraphs, at
// most MAX_PASSAGE_CHARS), and a query finds the passages holding it verbatim (case-insensitive) first,
// then those sharing its words, ranked by MiniSearch (BM25, with prefix and small-typo matching). The index
// lives only as long as the run that built it.
import MiniSearch from "minisearch";

export const MAX_PASSAGE_CHARS = 800;
const MIN_PASSAGE_CHARS = 200;

export interface Passage {
  fileId: string;
  filename: string;
  /** 1-based line of the file's text where the passage starts. */
  line: number;
  text: string;
}

export interface SearchHit extends Passage {
  /** "phrase": the passage holds the query verbatim; "terms": it shares words with it. */
  match: "phrase" | "terms";
  score: number;
}

/** Paragraphs of the text, small ones joined and long ones cut at whitespace, never longer than `max`. */
export function splitPassages(text: string, max = MAX_PASSAGE_CHARS): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  let current: string[] = [];
  let length = 0;
  let start = 1;
  const flush = () => {
    const body = current.join("\n").trim();
    if (body !== "") out.push({ line: start, text: body });
    current = [];
    length = 0;
  };
  text.split(/\r?\n/).forEach((raw, i) => {
    const lineNo = i + 1;
    if (raw.trim() === "") {
      if (length >= MIN_PASSAGE_CHARS) flush();
      else if (current.length > 0) current.push("");
      return;
    }
    let rest = raw;
    while (rest.length > 0) {
      if (length > 0 && length + rest.length + 1 > max) flush();
      if (current.length === 0) start = lineNo;
      if (rest.length <= max) {
        current.push(rest);
        length += rest.length + 1;
        rest = "";
      } else {
        const cut = rest.lastIndexOf(" ", max);
        const at = cut > max / 2 ? cut : max;
        current.push(rest.slice(0, at));
        length += at;
        rest = rest.slice(at).trimStart();
        flush();
      }
    }
  });
  flush();
  return out;
}

export class PassageIndex {
  private readonly passages: Passage[] = [];
  private readonly lower: string[] = [];
  private readonly index = new MiniSearch<{ id: number; text: string }>({ fields: ["text"], idField: "id" });

  add(fileId: string, filename: string, text: string): void {
    const docs = splitPassages(text).map((p) => {
      const id = this.passages.length;
      this.passages.push({ fileId, filename, line: p.line, text: p.text });
      this.lower.push(p.text.toLowerCase());
      return { id, text: p.text };
    });
    this.index.addAll(docs);
  }

  get size(): number {
    return this.passages.length;
  }

  search(query: string, limit: number): SearchHit[] {
    const q = query.trim();
    if (q === "") return [];
    const needle = q.toLowerCase();
    const scores = new Map<number, number>();
    for (const hit of this.index.search(q, { prefix: true, fuzzy: 0.2, combineWith: "OR" })) scores.set(hit.id as number, hit.score);
    const hits: Array<{ i: number; phrase: boolean; score: number }> = [];
    this.passages.forEach((_, i) => {
      const phrase = this.lower[i]!.includes(needle);
      const score = scores.get(i) ?? 0;
      if (phrase || score > 0) hits.push({ i, phrase, score });
    });
    hits.sort((a, b) => Number(b.phrase) - Number(a.phrase) || b.score - a.score || a.i - b.i);
    return hits.slice(0, limit).map(({ i, phrase, score }) => ({
      ...this.passages[i]!,
      match: phrase ? "phrase" : "terms",
      score: Math.round(score * 1000) / 1000,
    }));
  }
}
