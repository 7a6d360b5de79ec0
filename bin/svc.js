#!/usr/bin/env node
// The `svc` command: the compiled CLI (built by `npm run build`, which `npm install` runs through `prepare`).
//
// CommonJS (bin/package.json), so that this line runs before Node's ES module loader first uses libuv's
// thread pool, which fixes the pool's size: one thread, unless UV_THREADPOOL_SIZE is set, so that every
// llama.cpp decode starts from the same thread (server/engine/thread-policy.ts says why). Not on Windows,
// where a size set from inside the process does not reach libuv (libuv-pool.js).
"use strict";
require("./libuv-pool.js").useOnePoolThread(process.env, process.platform);
import("../dist/server/cli.js").catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
