// The data dir holds key hashes, settings, uploaded files and batch results: it is the user's alone (0700,
// its files 0600), whatever the umask, also when an earlier version created it world-readable. No-ops on
// Windows, where the folder under %APPDATA% is private already and modes do not apply.
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

const POSIX = process.platform !== "win32";

function restrict(path: string, mode: number): void {
  if (!POSIX) return;
  try {
    const stat = statSync(path);
    // Only what we own (chmod would fail on anything else), and only when others have access.
    if ((stat.mode & 0o077) !== 0 && stat.uid === process.getuid?.()) chmodSync(path, mode);
  } catch {
    // Gone or not ours: nothing to tighten.
  }
}

export function restrictDir(path: string): void {
  restrict(path, PRIVATE_DIR_MODE);
}

export function restrictFile(path: string): void {
  restrict(path, PRIVATE_FILE_MODE);
}

/**
 * Tightens a folder an earlier version wrote under the umask (0755 folders, 0644 files under the usual 022):
 * the folder and everything in it. Links are left alone (chmod would follow them out of the tree).
 */
export function restrictTree(dir: string): void {
  if (!POSIX) return;
  const pending = [dir];
  while (pending.length > 0) {
    const path = pending.pop()!;
    let entries: string[];
    try {
      if (!lstatSync(path).isDirectory()) continue;
      restrictDir(path);
      entries = readdirSync(path);
    } catch {
      continue; // gone meanwhile
    }
    for (const name of entries) {
      const child = join(path, name);
      try {
        const stat = lstatSync(child);
        if (stat.isDirectory()) pending.push(child);
        else if (stat.isFile()) restrictFile(child);
      } catch {
        // gone meanwhile
      }
    }
  }
}

/** Creates the data dir (0700) or tightens an existing one. */
export function prepareDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  restrictDir(dataDir);
}

/**
 * Creates `path` empty with mode 0600 if it does not exist, else tightens it. SQLite gives a database's
 * -wal, -shm and -journal files the database file's own mode, so they are 0600 too.
 */
export function preparePrivateFile(path: string): void {
  if (!existsSync(path)) closeSync(openSync(path, "a", PRIVATE_FILE_MODE));
  restrictFile(path);
}
