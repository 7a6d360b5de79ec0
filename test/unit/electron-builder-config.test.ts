// electron-builder.yml: the installers, what goes into the app, what is unpacked from app.asar, and which
// node-llama-cpp binaries each platform keeps. Patterns are judged by electron-builder's own FileMatcher.
import { Ajv } from "ajv";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { load } from "js-yaml";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");
const require = createRequire(join(root, "package.json"));

type Patterns = string[];
interface PlatformConfig {
  target: Array<string | { target: string }>;
  files?: Patterns;
}
interface BuilderConfig {
  appId: string;
  productName: string;
  directories: { output: string };
  files: Patterns;
  asarUnpack: Patterns;
  npmRebuild?: boolean;
  linux: PlatformConfig;
  mac: PlatformConfig;
  win: PlatformConfig;
}

const config = load(readFileSync(join(root, "electron-builder.yml"), "utf8")) as BuilderConfig;
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { main: string; scripts: Record<string, string> };
const llamaPackages = Object.keys(
  (JSON.parse(readFileSync(join(root, "node_modules", "node-llama-cpp", "package.json"), "utf8")) as { optionalDependencies: Record<string, string> }).optionalDependencies,
).filter((name) => name.startsWith("@node-llama-cpp/"));

// electron-builder's matcher: the same minimatch options and include/exclude order it uses when packing.
const { FileMatcher } = require("app-builder-lib/out/fileMatcher.js") as {
  FileMatcher: new (from: string, to: string, expand: (s: string) => string, patterns: Patterns) => { createFilter(): (file: string, stat: { isDirectory(): boolean }) => boolean };
};
function matches(patterns: Patterns, relative: string): boolean {
  const filter = new FileMatcher(root, root, (s) => s, patterns).createFilter();
  return filter(join(root, relative), { isDirectory: () => false });
}
/** Production node_modules: everything, less the exclusions of the top-level and the platform's files. */
function keptNodeModule(platform: "linux" | "mac" | "win", relative: string): boolean {
  const excludes = [...config.files, ...(config[platform].files ?? [])].filter((p) => p.startsWith("!"));
  return matches(["**/*", ...excludes], relative);
}
const targets = (p: PlatformConfig) => p.target.map((t) => (typeof t === "string" ? t : t.target));

describe("electron-builder.yml", () => {
  it("is a valid electron-builder configuration", () => {
    const schema = JSON.parse(readFileSync(require.resolve("app-builder-lib/scheme.json"), "utf8")) as object;
    const validate = new Ajv({ strict: false, allErrors: true }).compile(schema);
    expect(validate(config), JSON.stringify(validate.errors, null, 2)).toBe(true);
  });

  it("names the app and writes the installers to release/", () => {
    expect(config.productName).toBe("svc-desktop");
    expect(config.appId).toMatch(/^[a-z0-9-]+(\.[a-z0-9-]+)+$/);
    expect(config.directories.output).toBe("release");
    expect(config.npmRebuild).not.toBe(false);
  });

  it("builds AppImage and deb on Linux, dmg on macOS, NSIS on Windows", () => {
    expect(targets(config.linux).sort()).toEqual(["AppImage", "deb"]);
    expect(targets(config.mac)).toEqual(["dmg"]);
    expect(targets(config.win)).toEqual(["nsis"]);
  });

  it("packs the entry point, the server, the renderer and package.json, and no sources or test model", () => {
    expect(pkg.main).toBe("dist/main/main.js");
    for (const file of ["package.json", pkg.main, "dist/main/preload.cjs", "dist/server/index.js", "dist/server/cli.js", "dist/renderer/index.html", "dist/renderer/assets/index-abc.js", "resources/icons/tray.png", "resources/engine-native/solo-loop.cpp", "resources/engine-patches/addon-hooks.patch", "resources/engine-addon/CMakeLists.txt"])
      expect(matches(config.files, file), file).toBe(true);
    for (const file of ["main/main.ts", "server/index.ts", "resources/test-model/tiny.gguf", "test/unit/x.test.ts", "dist/main/tsconfig.tsbuildinfo", "dist/server/index.js.map", ".cache/electron-native/x/better_sqlite3.node", "release/x.AppImage"])
      expect(matches(config.files, file), file).toBe(false);
  });

  it("ships whisper.cpp's CPU build for transcripts, not its CUDA, Vulkan or WebAssembly builds", () => {
    for (const platform of ["linux", "mac", "win"] as const) {
      expect(keptNodeModule(platform, "node_modules/@fugood/whisper.node/lib/index.js"), platform).toBe(true);
      expect(keptNodeModule(platform, `node_modules/@fugood/node-whisper-${platform === "mac" ? "darwin-arm64" : `${platform === "win" ? "win32" : "linux"}-x64`}/index.node`), platform).toBe(true);
      for (const file of ["node_modules/@fugood/node-whisper-linux-x64-cuda/index.node", "node_modules/@fugood/node-whisper-win32-x64-vulkan/index.node", "node_modules/@fugood/node-whisper-wasm/dist/whisper.wasm"])
        expect(keptNodeModule(platform, file), `${platform} ${file}`).toBe(false);
    }
  });

  it("unpacks the native modules from app.asar", () => {
    for (const file of [
      "node_modules/better-sqlite3/build/Release/better_sqlite3.node",
      "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node",
      "node_modules/@node-llama-cpp/win-x64-cuda/bins/win-x64-cuda/ggml-cuda.dll",
      "node_modules/node-llama-cpp/bins/linux-x64/llama-addon.node",
      "node_modules/node-llama-cpp/llama/localBuilds/linux-x64/Release/llama-addon.node",
      "node_modules/@img/sharp-linux-x64/lib/sharp-linux-x64.node",
      "node_modules/@napi-rs/canvas-linux-x64-gnu/skia.linux-x64-gnu.node",
      "node_modules/@ffmpeg-installer/linux-x64/ffmpeg",
      "node_modules/tesseract.js-core/tesseract-core-simd-lstm.wasm",
      "node_modules/@tesseract.js-data/eng/4.0.0_best_int/eng.traineddata.gz",
      "node_modules/@fugood/node-whisper-linux-x64/index.node",
      "node_modules/koffi/build/koffi/linux_x64/koffi.node",
    ])
      expect(matches(config.asarUnpack, file), file).toBe(true);
    for (const file of ["node_modules/fastify/fastify.js", "node_modules/node-llama-cpp/dist/index.js", "dist/main/main.js"])
      expect(matches(config.asarUnpack, file), file).toBe(false);
  });

  it("keeps only the target platform's node-llama-cpp binaries", () => {
    expect(llamaPackages.length).toBeGreaterThan(6);
    for (const platform of ["linux", "mac", "win"] as const) {
      const kept = llamaPackages.filter((name) => keptNodeModule(platform, `node_modules/${name}/bins/${name.split("/")[1]}/llama-addon.node`));
      expect(kept.length, platform).toBeGreaterThan(0);
      expect(kept, platform).toEqual(llamaPackages.filter((name) => name.startsWith(`@node-llama-cpp/${platform}-`)));
      // node-llama-cpp itself and the other native module stay on every platform.
      expect(keptNodeModule(platform, "node_modules/node-llama-cpp/dist/index.js")).toBe(true);
      expect(keptNodeModule(platform, "node_modules/better-sqlite3/build/Release/better_sqlite3.node")).toBe(true);
    }
  });

  it("packs `svc engine build`'s Release folder and done marker, not its CMake tree, source copy or lock", () => {
    const build = "node_modules/node-llama-cpp/llama/localBuilds/linux-x64-5t5f6d545x431u3m611w2q302n3s486t5gr4257";
    for (const file of ["Release/llama-addon.node", "Release/libggml-cpu-zen4.so", "Release/_nlcBuildMetadata.json", "buildDone.status"]) {
      expect(keptNodeModule("linux", `${build}/${file}`), file).toBe(true);
      expect(matches(config.asarUnpack, `${build}/${file}`), file).toBe(true);
    }
    for (const file of ["CMakeFiles/CMakeOutput.log", "llama.cpp/ggml/src/ggml.c", "bin/llama-addon.node", "build.ninja", "CMakeCache.txt", ".ninja_log", "compile_commands.json"])
      expect(keptNodeModule("linux", `${build}/${file}`), file).toBe(false);
    expect(keptNodeModule("linux", `${build}.lock/lock`)).toBe(false);
    expect(pkg.scripts.dist).toBe("npm run build && node scripts/dist-engine.mjs && electron-builder");
  });

  it("keeps only the target platform's koffi module (madvise for huge pages, server/engine/huge-pages.ts)", () => {
    const koffi = (dir: string) => `node_modules/koffi/build/koffi/${dir}/koffi.node`;
    const own = { linux: ["linux_x64", "linux_arm64", "musl_x64"], mac: ["darwin_arm64", "darwin_x64"], win: ["win32_x64", "win32_arm64"] };
    for (const platform of ["linux", "mac", "win"] as const) {
      expect(keptNodeModule(platform, "node_modules/koffi/index.js"), platform).toBe(true);
      for (const [other, dirs] of Object.entries(own)) for (const dir of dirs) expect(keptNodeModule(platform, koffi(dir)), `${platform} ${dir}`).toBe(other === platform);
      expect(keptNodeModule(platform, koffi("freebsd_x64")), platform).toBe(false);
    }
  });
});
