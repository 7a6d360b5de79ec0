import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The svc-desktop package's folder (where its package.json is), found from this file whether it runs from
 * the sources or from dist/; null when it is not there (a bundle without it).
 */
export function packageRoot(): string | null {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, "package.json");
    if (existsSync(candidate)) {
      const pkg = JSON.parse(readFileSync(candidate, "utf8")) as { name?: string };
      if (pkg.name === "svc-desktop") return dir;
    }
    dir = dirname(dir);
  }
  return null;
}

/** The package version, found from this file whether it runs from the sources or from dist/. */
export function packageVersion(): string {
  const root = packageRoot();
  if (root === null) return "0.0.0";
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version?: string };
  return pkg.version ?? "0.0.0";
}
