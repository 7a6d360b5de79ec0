// Builds llama.cpp's own tools (llama-server, rpc-server, ...) once, from the llama.cpp source node-llama-cpp ships
// (node_modules/node-llama-cpp/llama/gitRelease.bundle), so the peer runs exactly the llama.cpp our engine
// runs. Binaries are cached under .cache/<name>/ (git-ignored) with the commit they were built from.
// Plain upstream defaults (OpenMP, -march=native, persistent thread pools): the llama-server a user would build,
// with one fix of ours to llama.cpp's AMX kernels (applyAmxPatch), without which it crashes on Xeons with AMX.
// Two builds use it: bench:peer's plain llama-server (.cache/peer) and the upstream tests' llama-server +
// rpc-server with the RPC backend (.cache/upstream, `npm run upstream:build`, run by CI before `npm test`).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../", import.meta.url));
export const PEER_CACHE = join(ROOT, ".cache", "peer");
/** The upstream tests' build: llama-server and rpc-server with -DGGML_RPC=ON. */
export const UPSTREAM_CACHE = join(ROOT, ".cache", "upstream");
const BUNDLE = join(ROOT, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");

function run(command: string, args: string[], cwd: string, quiet = false): string {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", stdio: quiet ? "pipe" : ["ignore", "pipe", "inherit"], maxBuffer: 64 * 1024 * 1024 });
  if (result.error) throw new Error(`${command} could not run: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} failed (exit ${result.status}):\n${(result.stdout ?? "").slice(-4000)}${result.stderr ?? ""}`);
  return result.stdout ?? "";
}

/** The commit of the shipped llama.cpp source. */
export function bundledCommit(): string {
  return run("git", ["bundle", "list-heads", BUNDLE], ROOT, true).trim().split(/\s+/)[0]!;
}

interface ToolBuild {
  /** Cache folder: source in llama.cpp/, build in build/, binaries copied to bin/ with a .commit stamp each. */
  cache: string;
  /** Extra cmake -D flags. */
  flags: string[];
  /** cmake targets, built in one `cmake --build` call. */
  targets: string[];
}

/**
 * The one patch of ours these builds take, resources/engine-patches/amx-tile-config.patch: a fix, not a
 * speed-up. Without it GCC 12 and later build llama.cpp's AMX kernels (compiled in by -march=native on Xeons
 * from Sapphire Rapids on) so that a quantized model's first prompt ends the server with SIGILL.
 */
const AMX_PATCH = join(ROOT, "resources", "engine-patches", "amx-tile-config.patch");

/** Applies AMX_PATCH to a llama.cpp checkout unless it is applied already (its paths are node-llama-cpp's: a/llama/llama.cpp/...). */
function applyAmxPatch(source: string): void {
  const args = ["-p3", "--silent", "-d", source, "-i", AMX_PATCH];
  // Applied already when it reverses cleanly (--force: never take a forward patch for a reversed one).
  if (spawnSync("patch", ["--dry-run", "-R", "--force", ...args], { stdio: "ignore" }).status === 0) return;
  run("patch", ["--forward", "--batch", "--no-backup-if-mismatch", "-r", "-", ...args], ROOT);
}

/** The paths of the built binaries (bin/<target>), after building whatever is missing or stale. */
export function ensureLlamaCppTools(build: ToolBuild, log: (line: string) => void): Record<string, string> {
  const commit = bundledCommit();
  // A build is current when it is of this commit with this patch.
  const stamp = `${commit} amx-tile-config ${createHash("sha256").update(readFileSync(AMX_PATCH)).digest("hex").slice(0, 12)}`;
  const binDir = join(build.cache, "bin");
  const paths: Record<string, string> = Object.fromEntries(build.targets.map((t) => [t, join(binDir, t)]));
  const current = (t: string): boolean =>
    existsSync(paths[t]!) && existsSync(`${paths[t]!}.commit`) && readFileSync(`${paths[t]!}.commit`, "utf8").trim() === stamp;
  const missing = build.targets.filter((t) => !current(t));
  if (missing.length === 0) return paths;

  const source = join(build.cache, "llama.cpp");
  const buildDir = join(build.cache, "build");
  if (!existsSync(join(source, "CMakeLists.txt"))) {
    log(`Cloning llama.cpp ${commit.slice(0, 10)} from node-llama-cpp's bundle into ${source}`);
    run("git", ["clone", "--quiet", BUNDLE, source], ROOT);
  }
  const head = run("git", ["rev-parse", "HEAD"], source, true).trim();
  if (head !== commit) run("git", ["checkout", "--quiet", "--force", commit], source);
  applyAmxPatch(source);
  log(`Configuring and building ${missing.join(", ")} in ${buildDir} (about 10+ minutes on 2 cores; cached afterwards)`);
  run(
    "cmake",
    [
      "-S", source, "-B", buildDir,
      "-DCMAKE_BUILD_TYPE=Release",
      "-DLLAMA_CURL=OFF",
      // No network here: no HTTPS client and no web UI download (the API is all the bench needs).
      "-DLLAMA_OPENSSL=OFF",
      "-DLLAMA_USE_PREBUILT_UI=OFF",
      "-DLLAMA_BUILD_UI=OFF",
      "-DLLAMA_BUILD_TESTS=OFF",
      "-DLLAMA_BUILD_EXAMPLES=OFF",
      "-DBUILD_SHARED_LIBS=OFF",
      ...build.flags,
    ],
    ROOT,
  );
  run("cmake", ["--build", buildDir, "--target", ...missing, "-j", String(availableParallelism())], ROOT);
  mkdirSync(binDir, { recursive: true });
  for (const t of missing) {
    copyFileSync(join(buildDir, "bin", t), paths[t]!);
    writeFileSync(`${paths[t]!}.commit`, `${stamp}\n`);
  }
  return paths;
}

/** Returns the path of a llama-server built from the shipped source, building it first if needed (~10+ min on 2 cores). */
export function ensureLlamaServer(log: (line: string) => void): string {
  return ensureLlamaCppTools({ cache: PEER_CACHE, flags: [], targets: ["llama-server"] }, log)["llama-server"]!;
}

/** llama-server and rpc-server with the RPC backend, for the upstream tests and bench:upstream. */
export function ensureUpstreamTools(log: (line: string) => void): { llamaServer: string; rpcServer: string } {
  const paths = ensureLlamaCppTools({ cache: UPSTREAM_CACHE, flags: ["-DGGML_RPC=ON"], targets: ["llama-server", "ggml-rpc-server"] }, log);
  return { llamaServer: paths["llama-server"]!, rpcServer: paths["ggml-rpc-server"]! };
}

/** Another of llama.cpp's tools (llama-bench, llama-batched-bench) from the build ensureLlamaServer made. */
export function ensurePeerTool(target: string, log: (line: string) => void): string {
  const server = ensureLlamaServer(log);
  const build = join(PEER_CACHE, "build");
  const binary = join(build, "bin", target);
  // Built again (only what changed) when llama-server was built after it: a new commit or patch.
  if (!existsSync(binary) || statSync(binary).mtimeMs < statSync(server).mtimeMs) {
    log(`Building ${target} in ${build}`);
    run("cmake", ["--build", build, "--target", target, "-j", String(availableParallelism())], ROOT);
  }
  return binary;
}

/**
 * `out`: the GGUF at `from` quantized to `type` (Q8_0, Q4_K_M, ...) by llama.cpp's llama-quantize from
 * bench:peer's build (built first if needed); kept, and not made again, once there.
 */
export function ensureQuantized(from: string, out: string, type: string, log: (line: string) => void): string {
  if (existsSync(out)) return out;
  const quantize = ensurePeerTool("llama-quantize", log);
  log(`quantizing ${from} to ${type}`);
  const r = spawnSync(quantize, [from, `${out}.partial`, type], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`llama-quantize failed: ${r.stderr.slice(-2000)}`);
  renameSync(`${out}.partial`, out);
  return out;
}

// `tsx bench/llama-server-build.ts upstream`: CI's build step (skipped when a current build exists).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1] && process.argv[2] === "upstream") {
  const tools = ensureUpstreamTools((line) => console.log(line));
  console.log(`llama-server: ${tools.llamaServer}\nrpc-server: ${tools.rpcServer}`);
}
