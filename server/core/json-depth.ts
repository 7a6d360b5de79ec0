// How deep a parsed JSON value nests, measured without recursion (values from clients may nest 100,000 levels).

/** Path segments kept for the answer: enough to name the field ("messages[1].content[0].input"). */
const NAMED_LEVELS = 6;

/**
 * Where `value` first nests deeper than `limit` levels, as a path of its first few levels ("" for the value
 * itself), or null when it does not. An explicit walk: no recursion, and it stops at the first.
 */
export function deeperThan(value: unknown, limit: number): string | null {
  const stack: Array<[unknown, number, string]> = [[value, 1, ""]];
  while (stack.length > 0) {
    const [node, depth, path] = stack.pop()!;
    if (node === null || typeof node !== "object") continue;
    // Parsed JSON is plain objects and arrays; anything else (a stream a route parses itself) is not walked.
    if (!Array.isArray(node) && Object.getPrototypeOf(node) !== Object.prototype && Object.getPrototypeOf(node) !== null) continue;
    if (depth > limit) return path;
    const named = depth < NAMED_LEVELS;
    if (Array.isArray(node)) {
      node.forEach((item, i) => {
        if (item !== null && typeof item === "object") stack.push([item, depth + 1, named ? `${path}[${i}]` : path]);
      });
    } else
      for (const key in node) {
        const item = (node as Record<string, unknown>)[key];
        if (item !== null && typeof item === "object") stack.push([item, depth + 1, named ? (path ? `${path}.${key}` : key) : path]);
      }
  }
  return null;
}

/** Whether `value` nests deeper than `limit` levels. */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  return deeperThan(value, limit) !== null;
}
