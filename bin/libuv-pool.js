// libuv's thread pool size for the `svc` command (bin/svc.js); CommonJS, loaded before anything else.
"use strict";

/**
 * Sets UV_THREADPOOL_SIZE=1 in `env` unless the user set a size; returns whether it did.
 *
 * Not on Windows: there libuv reads the variable through the C runtime's copy of the environment, which
 * Node's `process.env` does not update (nodejs/help#1429), so setting it here would change nothing while
 * the server's thread policy, reading `process.env`, believed it had. Windows users set it themselves
 * (docs/configuration.md, "The libuv pool").
 *
 * @param {NodeJS.ProcessEnv} env
 * @param {NodeJS.Platform} platform
 * @returns {boolean}
 */
function useOnePoolThread(env, platform) {
  if (platform === "win32") return false;
  if ((env.UV_THREADPOOL_SIZE ?? "").trim() !== "") return false;
  env.UV_THREADPOOL_SIZE = "1";
  return true;
}

module.exports = { useOnePoolThread };
