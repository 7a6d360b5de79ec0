// One upstream inference server's address (docs/scale-out.md), checked one way everywhere: `--upstream` and
// SVC_UPSTREAM (config.ts), the settings store's `engine.upstreams` (engine/upstream-settings.ts), and the
// desktop window's form (Server page, Upstream engines), which bundles this file. Pure and dependency-free
// (the URL class is Node's and the browser's alike), so the renderer can import it.

/** Why an address is not one svc can generate on; each caller words it for its reader. */
export type UpstreamUrlProblem = "not_a_url" | "not_http" | "credentials" | "query" | "comma";

/**
 * The address as it will be used (trimmed, without trailing slashes: paths are appended to it), or why not:
 * an http:// or https:// URL with a host, no user name or password (the key travels as a header), no ?query
 * or #fragment (the endpoints' paths go after it), and no comma (lists of them are comma-separated).
 */
export function checkUpstreamUrl(text: string): { url: string } | { problem: UpstreamUrlProblem } {
  const url = text.trim().replace(/\/+$/, "");
  if (url.includes(",")) return { problem: "comma" };
  // Written out: "localhost:8080" would parse as a URL of the scheme "localhost:".
  if (!/^https?:\/\//i.test(url)) return { problem: /^https?:$/i.test(url) ? "not_a_url" : "not_http" };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { problem: "not_a_url" };
  }
  if (parsed.hostname === "") return { problem: "not_a_url" };
  if (parsed.username !== "" || parsed.password !== "") return { problem: "credentials" };
  if (parsed.search !== "" || parsed.hash !== "" || url.includes("?") || url.includes("#")) return { problem: "query" };
  return { url };
}

/** The problem in the window's words: the form says it as it is typed, and the console when it refuses a save. */
export function upstreamUrlProblemText(problem: UpstreamUrlProblem): string {
  switch (problem) {
    case "not_http":
      return "An upstream's address starts with http:// or https://, like http://192.168.1.20:8080.";
    case "credentials":
      return "Leave the user name and password out of the address: the key goes in its own field.";
    case "query":
      return "The address ends at the server (or its path), without ? or #.";
    case "comma":
      return "One address at a time, without commas.";
    case "not_a_url":
      return "That is not an address like http://192.168.1.20:8080.";
  }
}
