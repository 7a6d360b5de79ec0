// A batch before it is created: read from a JSONL file (one {"custom_id", "params"} per line, the format the
// Anthropic console takes), or written in the window (one prompt per line): the requests, and for each the
// line it came from.
export interface Draft {
  file: string;
  size: number;
  requests: unknown[];
  lineOf: number[];
  problems: string[];
}

/** Batches are limited to 256 MiB; the window reads the file itself, so it says so before sending. */
export const MAX_FILE_BYTES = 256 * 1024 * 1024;

export function parseJsonl(file: string, size: number, text: string): Draft {
  const draft: Draft = { file, size, requests: [], lineOf: [], problems: [] };
  text.split(/\r?\n/).forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      draft.requests.push(JSON.parse(line));
      draft.lineOf.push(i + 1);
    } catch {
      if (draft.problems.length < 20) draft.problems.push(`line ${i + 1}: not valid JSON`);
    }
  });
  if (draft.requests.length === 0 && draft.problems.length === 0) draft.problems.push("the file has no requests (one JSON object per line)");
  return draft;
}

export interface Written {
  prompts: string;
  system: string;
  maxTokens: number;
  thinking: boolean;
}

/** One request per non-empty line of `prompts`, each with the same system prompt and length limit. */
export function draftFromPrompts(written: Written): Draft {
  const lines = written.prompts.split(/\r?\n/).map((l) => l.trim());
  const requests: unknown[] = [];
  const lineOf: number[] = [];
  lines.forEach((text, i) => {
    if (!text) return;
    lineOf.push(i + 1);
    requests.push({
      custom_id: `prompt-${requests.length + 1}`,
      params: {
        model: "svc",
        max_tokens: written.maxTokens,
        ...(written.thinking ? {} : { thinking: { type: "disabled" } }),
        ...(written.system.trim() ? { system: written.system.trim() } : {}),
        messages: [{ role: "user", content: text }],
      },
    });
  });
  const bytes = new TextEncoder().encode(JSON.stringify(requests)).length;
  return { file: "written in the window", size: bytes, requests, lineOf, problems: requests.length === 0 ? ["write at least one prompt"] : [] };
}
