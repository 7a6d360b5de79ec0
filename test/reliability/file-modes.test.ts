// Issue 38, item 5: uploaded files ignored the private-mode rule. Under umask 000, files/, files/.incoming/
// and each file-…/ were 0777 and their files 0666 (0755/0644 under the usual 022): only the data dir's own
// 0700 kept them private. Everything the server writes under the data dir is 0700 (folders) and 0600
// (files) whatever the umask, and an older files/ tree left readable is tightened at start.
import { chmodSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createKey, startSvc, tempDataDir } from "../support/svc-process.js";

const POSIX = process.platform !== "win32";

/** Every path under `dir` whose mode is not 0700 (folders) or 0600 (files), with its mode. */
function notPrivate(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const mode = statSync(path).mode & 0o777;
    const want = entry.isDirectory() ? 0o700 : 0o600;
    if (mode !== want) out.push(`${path.slice(dir.length)} ${mode.toString(8)}`);
    if (entry.isDirectory()) out.push(...notPrivate(path).map((p) => `${path.slice(dir.length)}${p}`));
  }
  return out;
}

/** Every path under `dir`, relative to it, folders with a trailing slash. */
function tree(dir: string, prefix = ""): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? [`${prefix}${entry.name}/`, ...tree(join(dir, entry.name), `${prefix}${entry.name}/`)] : [`${prefix}${entry.name}`],
  );
}

let umaskBefore: number | null = null;
afterEach(() => {
  if (umaskBefore !== null) process.umask(umaskBefore);
  umaskBefore = null;
});

async function upload(url: string, key: string, name: string, text: string): Promise<{ id: string; status: string }> {
  const form = new FormData();
  form.append("purpose", "user_data");
  form.append("file", new Blob([text], { type: "text/plain" }), name);
  const res = await fetch(`${url}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as { id: string; status: string };
}

describe.skipIf(!POSIX)("uploaded files are private whatever the umask (issue 38, item 5)", () => {
  it("under umask 000 every folder the server writes under the data dir is 0700 and every file 0600", async () => {
    umaskBefore = process.umask(0o000);
    const dataDir = join(tempDataDir(), "data");
    const key = createKey(dataDir);
    const server = await startSvc({ dataDir });
    try {
      const files = [await upload(server.url, key, "notes.txt", "Private notes.\n"), await upload(server.url, key, "plan.md", "# A plan\n")];
      for (const file of files) expect(file.status).toBe("processed");
      const written = tree(dataDir);
      // The assertions below cover what an upload writes: its folder, the bytes and the extracted content.
      expect(written).toEqual(expect.arrayContaining(["files/", "files/.incoming/"]));
      for (const { id } of files) expect(written).toEqual(expect.arrayContaining([`files/${id}/`, `files/${id}/original`, `files/${id}/content.json`]));
      expect(notPrivate(dataDir)).toEqual([]);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it("a files/ tree an earlier version left readable is made private at start", async () => {
    const dataDir = tempDataDir();
    const key = createKey(dataDir);
    const first = await startSvc({ dataDir });
    const { id } = await upload(first.url, key, "notes.txt", "Private notes.\n");
    expect(await first.stop()).toBe(0);
    // As the earlier version left them under umask 022 (and a stray file of its own in a file's folder).
    for (const dir of ["files", "files/.incoming", `files/${id}`]) chmodSync(join(dataDir, dir), 0o755);
    for (const file of [`files/${id}/original`, `files/${id}/content.json`]) chmodSync(join(dataDir, file), 0o644);
    mkdirSync(join(dataDir, "files", id, "extra"), { mode: 0o755 });
    writeFileSync(join(dataDir, "files", id, "extra", "left-over"), "x", { mode: 0o644 });
    const again = await startSvc({ dataDir });
    try {
      expect(notPrivate(dataDir)).toEqual([]);
      const res = await fetch(`${again.url}/v1/files/${id}`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(200);
    } finally {
      expect(await again.stop()).toBe(0);
    }
  });
});
