#!/usr/bin/env node
// The `svc` command: the compiled CLI (built by `npm run build`, which `npm install` runs through `prepare`).
import "../dist/server/cli.js";
