// Builds llama.cpp's own llama-server once, from the llama.cpp source node-llama-cpp ships
// (node_modules/node-llama-cpp/llama/gitRelease.bundle), so the peer runs exactly the llama.cpp our engine
// runs. The binary is cached under .cache/peer/ (git-ignored) with the commit it was built from.
// Plain upstream defaults (OpenMP, -march=native, persistent thread pools): the llama-server a user would build.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../", import.meta.url));
export const PEER_CACHE = join(ROOT, ".cache", "peer");
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

/** Returns the path of a llama-server built from the shipped source, building it first if needed (~10+ min on 2 cores). */
export function ensureLlamaServer(log: (line: string) => void): string {
  const commit = bundledCommit();
  const binary = join(PEER_CACHE, "bin", "llama-server");
  const stamp = join(PEER_CACHE, "bin", "llama-server.commit");
  if (existsSync(binary) && existsSync(stamp) && readFileSync(stamp, "utf8").trim() === commit) return binary;

  const source = join(PEER_CACHE, "llama.cpp");
  const build = join(PEER_CACHE, "build");
  if (!existsSync(join(source, "CMakeLists.txt"))) {
    log(`Cloning llama.cpp ${commit.slice(0, 10)} from node-llama-cpp's bundle into ${source}`);
    run("git", ["clone", "--quiet", BUNDLE, source], ROOT);
  }
  const head = run("git", ["rev-parse", "HEAD"], source, true).trim();
  if (head !== commit) run("git", ["checkout", "--quiet", commit], source);
  log(`Configuring and building llama-server in ${build} (about 10+ minutes on 2 cores; cached afterwards)`);
  run(
    "cmake",
    [
      "-S", source, "-B", build,
      "-DCMAKE_BUILD_TYPE=Release",
      "-DLLAMA_CURL=OFF",
      // No network here: no HTTPS client and no web UI download (the API is all the bench needs).
      "-DLLAMA_OPENSSL=OFF",
      "-DLLAMA_USE_PREBUILT_UI=OFF",
      "-DLLAMA_BUILD_UI=OFF",
      "-DLLAMA_BUILD_TESTS=OFF",
      "-DLLAMA_BUILD_EXAMPLES=OFF",
      "-DBUILD_SHARED_LIBS=OFF",
    ],
    ROOT,
  );
  run("cmake", ["--build", build, "--target", "llama-server", "-j", String(availableParallelism())], ROOT);
  mkdirSync(join(PEER_CACHE, "bin"), { recursive: true });
  copyFileSync(join(build, "bin", "llama-server"), binary);
  writeFileSync(stamp, `${commit}\n`);
  return binary;
}

/** Another of llama.cpp's tools (llama-bench, llama-batched-bench) from the build ensureLlamaServer made. */
export function ensurePeerTool(target: string, log: (line: string) => void): string {
  ensureLlamaServer(log);
  const build = join(PEER_CACHE, "build");
  const binary = join(build, "bin", target);
  if (!existsSync(binary)) {
    log(`Building ${target} in ${build}`);
    run("cmake", ["--build", build, "--target", target, "-j", String(availableParallelism())], ROOT);
  }
  return binary;
}
