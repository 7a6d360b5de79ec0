#!/usr/bin/env node
// Builds better-sqlite3 for the installed Electron's ABI, for `npm start` in development. node_modules keeps
// the Node build (the CLI and the tests use it); this one goes to .cache/electron-native/<electron>-<platform>-<arch>/,
// where main/dev-native.ts finds it. Packaged apps do not need it: electron-builder rebuilds node_modules.
// It downloads (a prebuilt binary, else Electron's headers to compile against), so it needs the network.
import { spawnSync } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "package.json"));
const force = process.argv.includes("--force");

const electronVersion = JSON.parse(readFileSync(require.resolve("electron/package.json"), "utf8")).version;
const platform = process.platform;
const arch = process.env.npm_config_arch || process.arch;
const outDir = join(root, ".cache", "electron-native", `${electronVersion}-${platform}-${arch}`);
const outFile = join(outDir, "better_sqlite3.node");

if (existsSync(outFile) && !force) {
  console.log(`electron-native: ${outFile} is there (Electron ${electronVersion}); --force rebuilds it.`);
  process.exit(0);
}

const sqliteDir = dirname(require.resolve("better-sqlite3/package.json"));
const work = mkdtempSync(join(tmpdir(), "svc-electron-native-"));
const copy = join(work, "better-sqlite3");
// A copy without build/, so nothing built for Node is mistaken for the Electron build.
cpSync(sqliteDir, copy, { recursive: true, filter: (src) => !src.startsWith(join(sqliteDir, "build")) });
const built = join(copy, "build", "Release", "better_sqlite3.node");

function run(label, args) {
  console.log(`electron-native: ${label}`);
  const result = spawnSync(process.execPath, args, { cwd: copy, stdio: "inherit", env: { ...process.env, npm_config_runtime: "electron", npm_config_target: electronVersion } });
  return result.status === 0 && existsSync(built);
}

function prebuilt() {
  const bin = require.resolve("prebuild-install/bin.js");
  return run(`prebuilt binary for Electron ${electronVersion} (${platform}-${arch})`, [bin, "--runtime", "electron", "--target", electronVersion, "--arch", arch, "--platform", platform, "--verbose"]);
}

function compiled() {
  // node_modules' own node-gyp, else the one npm bundles (npm tells scripts where it is).
  const candidates = [process.env.npm_config_node_gyp];
  try {
    candidates.push(require.resolve("node-gyp/bin/node-gyp.js"));
  } catch {
    candidates.push(join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "node_modules", "node-gyp", "bin", "node-gyp.js"));
  }
  const gyp = candidates.find((c) => c && existsSync(c));
  if (!gyp) return false;
  return run(`compiling against Electron ${electronVersion}'s headers`, [
    gyp,
    "rebuild",
    "--release",
    `--target=${electronVersion}`,
    `--arch=${arch}`,
    "--dist-url=https://electronjs.org/headers",
    `--devdir=${join(root, ".cache", "electron-gyp")}`,
  ]);
}

try {
  if (!prebuilt() && !compiled()) {
    console.error(
      `electron-native: could not get better-sqlite3 for Electron ${electronVersion}. It needs the network (GitHub for the prebuilt ` +
        "binary, electronjs.org for headers) and, to compile, Python and a C++ toolchain.",
    );
    process.exitCode = 1;
  } else {
    mkdirSync(outDir, { recursive: true });
    copyFileSync(built, outFile);
    console.log(`electron-native: wrote ${outFile}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
