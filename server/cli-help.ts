// `svc`'s usage and help texts, kept apart from cli.ts's commands: what the CLI prints, one constant a
// command (and the whole usage, which lists every command's). Changing a flag means changing both files.
import { defaultDataDir } from "./config.js";
import { packageVersion } from "./core/version.js";

const SERVE_USAGE = `  svc serve [--host 127.0.0.1] [--port N|0] [--data-dir DIR] [--model PATH.gguf] [--threads N]
            [--sequences N] [--context-size N] [--gpu auto|cuda|vulkan|metal|cpu] [--mmap auto|on|off]
            [--log-level LEVEL]
            [--cors-origins ORIGIN,...] [--concurrency-limit N] [--queue-limit N] [--agent-runs-limit N]
            [--lan] [--allowed-hosts NAME,...]
            [--headers-timeout S] [--request-timeout S] [--keep-alive-timeout S] [--stream-write-timeout S]
            [--max-connections N] [--connections-per-client N] [--idle-connections-per-client N]
            [--audit-retention-days N] [--console-session-minutes N] [--engine-restart-limit N]
            [--warm-start on|off] [--warm-start-max-gb N] [--speculation prompt-lookup|off] [--draft-model FILE]
            [--upstream URL[,URL...] [--upstream-key KEY[,KEY...]] [--upstream-affinity on|off]]`;
const KEYS_USAGE = `  svc keys create [--data-dir DIR] [--account NAME] [--name LABEL] [--reasoning-trace]
  svc keys list [--data-dir DIR] [--account NAME] [--json]
  svc keys revoke KEY_ID [--data-dir DIR]
  svc keys update KEY_ID --reasoning-trace on|off [--data-dir DIR]`;
const ACCOUNTS_USAGE = `  svc accounts create NAME [--key-name LABEL] [--data-dir DIR] [--json]
  svc accounts list [--data-dir DIR] [--json]
  svc accounts disable NAME [--data-dir DIR]
  svc accounts enable NAME [--data-dir DIR]
  svc accounts reset-password NAME [--data-dir DIR] [--json]`;
const MODELS_USAGE = `  svc models list [--data-dir DIR] [--json]
  svc models pull [hf:user/repo:quant | hf:user/repo/file.gguf | https://URL | recommended] [--sha256 HEX] [--mmproj SOURCE | --no-mmproj] [--data-dir DIR]
  svc models use FILE [--data-dir DIR]
  svc models remove FILE [--force] [--data-dir DIR]
  svc models pull --speech [base | small | ... | hf:user/repo/file.bin | https://URL] [--sha256 HEX] [--data-dir DIR]
  svc models use --speech FILE | svc models remove --speech FILE [--force] [--data-dir DIR]
  svc models bench-threads [--model FILE] [--threads 1,2,4] [--tokens N] [--data-dir DIR]`;
const ENGINE_USAGE = `  svc engine [status] | svc engine build | svc engine remove
  svc engine build [--gpu auto|cpu|cuda|vulkan] [--addon-only]
  svc engine warm-start [list | clear] [--data-dir DIR]`;

export const SERVE_HELP = `Usage:
${SERVE_USAGE}

Starts the API server: http://127.0.0.1:8787 unless --port says otherwise (0 picks a free port).
Without --model it loads the active model (\`svc models use\`) and follows it: a running server switches when
it changes. SIGHUP reloads the model; Ctrl+C finishes the requests in flight, then stops.
Environment: SVC_HOST, SVC_PORT, SVC_DATA_DIR, SVC_MODEL, SVC_THREADS, SVC_SEQUENCES, SVC_CONTEXT_SIZE,
SVC_GPU, SVC_MMAP, SVC_LOG_LEVEL, SVC_CORS_ORIGINS, SVC_CONCURRENCY_LIMIT, SVC_QUEUE_LIMIT, SVC_AGENT_RUNS_LIMIT,
SVC_ENGINE_RESTART_LIMIT, SVC_WARM_START, SVC_WARM_START_MAX_GB, SVC_AUDIT_RETENTION_DAYS, SVC_CONSOLE_SESSION_MINUTES,
SVC_UPSTREAM, SVC_UPSTREAM_KEY, SVC_UPSTREAM_AFFINITY, SVC_SPECULATION, SVC_DRAFT_MODEL. Flags win over the environment.
--speculation: prompt-lookup (the default) guesses the next tokens from the conversation (an edited file is
mostly the file it was given) and checks them in one step; answers are the same as with off, only faster
where they repeat their prompt (docs/api.md, "Speculation").
--draft-model: guess with a small model of the same family instead (a path, or a file in the models folder;
e.g. a 0.5B beside a 7B): it writes a few tokens ahead and the served model checks them in one step; answers
stay the same. A model's own setting (the window's Models page) wins over it.
--upstream: generate on llama-server replicas (its /completion) instead of the built-in engine; --model (or
the active model) must be the GGUF they serve, read here for its tokenizer and chat template only. Several
URLs: requests spread over them with prefix affinity (--upstream-affinity off: round-robin), a failed one is
drained (docs/scale-out.md). llama-server and vLLM are told apart by their endpoints.
--mmap: auto reads the model into memory, in huge pages, on Linux with transparent huge pages when it runs
on the CPU and fits (faster decoding), and maps the file elsewhere; on always maps the file (memory the
kernel can reclaim), off always reads it in.
Default data dir: ${defaultDataDir()}
`;

export const KEYS_HELP = `Usage:
${KEYS_USAGE}

API keys for the server's clients. A key is printed once, on the last line of \`svc keys create\`; only its
SHA-256 is stored, so a lost key cannot be shown again: create a new one and revoke the old.
`;

export const ACCOUNTS_HELP = `Usage:
${ACCOUNTS_USAGE}

Accounts for the people and tools that use this server. \`svc accounts create\` prints a temporary password
and the account's first API key, both once: hand them to the holder, who logs in at /v1/console on the
server, chooses a password and manages their own keys there. Disabling an account stops its keys at once.
`;

export const MODELS_HELP = `Usage:
${MODELS_USAGE}

Models live in the models folder of the data dir (${defaultDataDir()}/models unless --data-dir or
SVC_DATA_DIR says otherwise). \`svc models pull\` with no source downloads the recommended model;
\`svc models list\` shows what is there and marks with * the one \`svc serve\` loads.
A vision model's projector (its mmproj GGUF) is pulled with it when the hf: repository names one, or from
--mmproj (hf:user/repo/file.gguf, https://URL or a file), and saved beside it as MODEL.mmproj.gguf: the model
then sees images (\`svc models list\` says "sees images"). --no-mmproj skips it.
Speech models (whisper.cpp, for transcripts of uploaded audio and video) live in models/speech:
\`svc models pull --speech\` downloads whisper base (about 148 MB); without one, uploads say that no transcript
is available.
`;

export const ENGINE_HELP = `Usage:
${ENGINE_USAGE}

The server runs the model with llama.cpp through node-llama-cpp, whose prebuilt CPU binaries come from an
older compiler. \`svc engine build\` compiles them again on this machine from the same llama.cpp source
(Linux; needs cmake, make, git, patch and a C++ compiler: \`sudo apt-get install cmake build-essential git
patch\`; about 10 minutes on 2 cores), with six changes of ours to node-llama-cpp: llama.cpp's worker
threads are kept from one token to the next, a lone answer's tokens are decoded and sampled by a thread of
their own, several answers' tokens are sampled in the job that decodes them, a draft model's drafts are
written in one job, a step of a few answers multiplies each weight row by all of their tokens at once, and a
step's few tokens of one answer (its guesses) attend to the context together, with the same sums as a
token alone (speculation then never changes a greedy answer). On a 2-core Zen 4 such a build read prompts
1.7 to 1.9 times as fast as the prebuilt binaries, generated one answer faster than llama.cpp's own
llama-server on the same model file and four at once 1.2 to 1.9 times as fast (docs/performance.md). It is
portable like them (a library per CPU family, the right one chosen at load) and runs the CPU from the
server's next start.

Where the server runs CUDA or Vulkan (or with --gpu cuda|vulkan), \`svc engine build\` compiles only
node-llama-cpp's addon with the first four changes, against that backend's prebuilt llama.cpp libraries:
about 15 seconds, no CUDA or Vulkan SDK. --addon-only does the same for the CPU's prebuilt libraries (the
addon's paths without the faster kernels; the full build is preferred where both exist).
/health says which runs ("gpu": {"build": "local", "local_build": "full"}, "addon" for the addon alone, or
"build": "prebuilt"). Builds are kept outside node_modules
(~/.cache/svc-desktop/engine-builds) and put back after a reinstall (npm ci). \`svc engine remove\` deletes
them: the server goes back to the prebuilt binaries.

\`svc engine warm-start\` lists the prompt prefixes warm start saved (\`svc serve --warm-start on\`: the KV
cache of long system prompts and tool definitions, restored after a restart); \`svc engine warm-start clear\`
removes them.
`;

export const USAGE = `svc ${packageVersion()}: a local LLM API server (Chat Completions, Responses, Messages).

Usage:
${SERVE_USAGE}
${KEYS_USAGE}
${ACCOUNTS_USAGE}
${MODELS_USAGE}
${ENGINE_USAGE}
  svc COMMAND --help       more about one command

A --host other than loopback needs --lan (the API is then reachable from the network; see docs/security.md).
Without --model, \`svc serve\` loads the active model (\`svc models use\`) and follows it: a running server
switches when it changes. SIGHUP reloads the model.
Environment: SVC_HOST, SVC_PORT, SVC_DATA_DIR, SVC_MODEL, SVC_THREADS, SVC_SEQUENCES, SVC_CONTEXT_SIZE,
SVC_GPU, SVC_MMAP, SVC_LOG_LEVEL, SVC_CORS_ORIGINS, SVC_CONCURRENCY_LIMIT, SVC_QUEUE_LIMIT, SVC_AGENT_RUNS_LIMIT,
SVC_ENGINE_RESTART_LIMIT, SVC_WARM_START, SVC_WARM_START_MAX_GB, SVC_LAN, SVC_ALLOWED_HOSTS, SVC_HEADERS_TIMEOUT, SVC_REQUEST_TIMEOUT, SVC_KEEP_ALIVE_TIMEOUT, SVC_STREAM_WRITE_TIMEOUT, SVC_MAX_CONNECTIONS,
SVC_CONNECTIONS_PER_CLIENT, SVC_IDLE_CONNECTIONS_PER_CLIENT,
SVC_AUDIT_RETENTION_DAYS, SVC_CONSOLE_SESSION_MINUTES, SVC_DOWNLOAD_STALL_TIMEOUT. Flags win over the environment.
Account holders log in to their console at <base URL>/v1/console.
Default data dir: ${defaultDataDir()}
`;
